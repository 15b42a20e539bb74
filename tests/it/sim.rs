//! Integration tests: the simulated grid through the real engine in virtual
//! time (`cosched::sim::run`), against the scenarios of `shared/scenarios`.

use crate::util;
use cosched::policy::PolicyConfig;
use cosched::sim::{self, Capacity, JobType, Scenario, SimOptions};

fn scenarios() -> Vec<(String, Scenario)> {
    sim::load_scenarios(&util::shared().join("scenarios/scenarios.toml")).expect("shared scenarios load")
}

fn scenario(name: &str) -> Scenario {
    scenarios().into_iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("scenario {name}")).1
}

fn policy(name: &str) -> PolicyConfig {
    PolicyConfig::named(name).expect("known policy")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn scenarios_load_in_file_order() {
    let names: Vec<String> = scenarios().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["S1", "S1b", "S2", "S3", "S4", "S5", "S6", "S1L", "S3L"]);
    let s5 = scenario("S5");
    assert_eq!(s5.sites[0].cap_windows, vec![[2000.0, 5000.0, 0.5]]);
    assert!(scenario("S6").sites[2].dead);
}

#[test]
fn bad_scenarios_are_diagnosed_with_their_name() {
    let err = sim::parse_scenarios("[scenarios.X]\nn_jobs = 1\nbase_runtime = 1\nsites = []\n").unwrap_err();
    assert!(err.contains("scenario X") && err.contains("site"), "{err}");
    let err = sim::parse_scenarios(
        "[scenarios.Y]\nn_jobs = 1\nbase_runtime = 1\nsites = [{ name = \"a\", slots = 1, p_fail = 2 }]\n",
    )
    .unwrap_err();
    assert!(err.contains("scenario Y") && err.contains("p_fail"), "{err}");
    let err = sim::parse_scenarios("[scenarios.Z]\nn_jobs = 1\nbase_runtime = 1\nbogus = 3\nsites = []\n")
        .unwrap_err();
    assert!(err.contains("bogus"), "{err}");
}

#[test]
fn same_seed_same_trace() {
    let sc = scenario("S3");
    let opts = SimOptions { trace: true, ..SimOptions::default() };
    for name in ["jobrouter", "oracle"] {
        let a = sim::run(&sc, &policy(name), 11, &opts);
        let b = sim::run(&sc, &policy(name), 11, &opts);
        assert!(!a.trace.is_empty(), "{name}: trace recorded");
        assert_eq!(a.trace, b.trace, "{name} seed 11: traces differ");
        assert_eq!(a.metrics, b.metrics, "{name} seed 11: metrics differ");
        let c = sim::run(&sc, &policy(name), 12, &opts);
        assert_ne!(a.metrics.makespan, c.metrics.makespan, "{name}: seeds 11 and 12 gave the same run");
    }
}

#[test]
fn a_site_below_its_knee_runs_every_job_in_exactly_its_work() {
    // No jitter, no wait, C ≥ n: every job ends at base_runtime / speed.
    let sc = sim::parse_scenarios(
        "[scenarios.flat]\nn_jobs = 30\nbase_runtime = 400\n\
         sites = [ { name = \"a\", slots = 40, capacity = 30, beta = 0.5, speed = 2.0 } ]\n",
    )
    .unwrap()
    .remove(0)
    .1;
    for name in ["bulk", "jobrouter", "oracle"] {
        let r = sim::run(&sc, &policy(name), 1, &SimOptions::default());
        assert!(r.errors.is_empty(), "{name}: {:?}", r.errors);
        assert_eq!(r.jobs.len(), 30);
        for j in &r.jobs {
            assert!(
                (j.ended - j.started - 200.0).abs() < 1e-6,
                "{name}: job {} ran {}",
                j.job,
                j.ended - j.started
            );
        }
    }
}

#[test]
fn dead_site_runs_hang_within_the_horizon() {
    let sc = scenario("S6");
    let opts = SimOptions { horizon: 50_000.0, ..SimOptions::default() };
    let r = sim::run(&sc, &policy("bulk"), 1, &opts);
    assert!(r.hang, "bulk on S6 seed 1 should hang");
    assert_eq!(r.metrics.makespan, None);
    assert!(r.metrics.stopped_at >= 50_000.0 && r.metrics.stopped_at < 50_001.0, "{}", r.metrics.stopped_at);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let stuck = r.metrics.sites.iter().find(|s| s.name == "X").unwrap();
    assert_eq!((stuck.peak_concurrency, stuck.jobs_done), (0, 0));
    assert!(r.metrics.jobs_done < sc.n_jobs() && r.metrics.jobs_done > 0);
    // The oracle knows X is dead and finishes.
    let r = sim::run(&sc, &policy("oracle"), 1, &SimOptions::default());
    assert!(!r.hang && r.errors.is_empty(), "oracle on S6: {:?}", r.errors);
}

#[test]
fn failures_return_jobs_and_are_counted_as_waste() {
    let sc = sim::parse_scenarios(
        "[scenarios.f]\nn_jobs = 200\nbase_runtime = 100\njitter = 0.2\n\
         sites = [ { name = \"a\", slots = 50, p_fail = 0.3, wait_mean = 5 } ]\n",
    )
    .unwrap()
    .remove(0)
    .1;
    for name in ["bulk", "jobrouter", "oracle"] {
        let r = sim::run(&sc, &policy(name), 3, &SimOptions::default());
        assert!(r.errors.is_empty(), "{name} seed 3: {:?}", r.errors);
        assert_eq!(r.metrics.jobs_done, 200, "{name} seed 3");
        assert!(r.metrics.wasted_area > 0.0, "{name} seed 3: failures waste time");
        assert!(r.attempts.len() > 200, "{name} seed 3: failed attempts were resubmitted");
    }
}

#[test]
fn a_polled_sites_starts_and_ends_are_heard_at_the_gridmanagers_polls() {
    // 40 jobs of 100 s on 20 slots, no waits: bulk ends at 200 s. Polled
    // every 30 s, every start and end is heard at a multiple of 30, the
    // second wave's starts at the poll after the first's ends (120, not 100:
    // the site started them at 100, as it does, but the user log says 120),
    // and the run ends when the last end is heard, at 210.
    let text = |poll: f64, declared: u32| {
        format!(
            "[scenarios.p]\nn_jobs = 40\nbase_runtime = 100\n\
             sites = [ {{ name = \"cc\", slots = 20, declared_slots = {declared}, poll_period = {poll} }} ]\n"
        )
    };
    let sc = sim::parse_scenarios(&text(30.0, 20)).unwrap().remove(0).1;
    let r = sim::run(&sc, &policy("bulk"), 1, &SimOptions::default());
    assert!(r.errors.is_empty() && !r.hang, "{:?}", r.errors);
    for a in &r.attempts {
        for t in [a.started, a.ended].into_iter().flatten() {
            assert!((t / 30.0 - (t / 30.0).round()).abs() < 1e-9, "job {} heard at {t}", a.job);
        }
    }
    assert_eq!(r.metrics.makespan, Some(210.0));
    let mut second_wave: Vec<f64> =
        r.attempts.iter().filter_map(|a| a.started).filter(|&t| t > 0.0).collect();
    second_wave.dedup();
    assert_eq!(second_wave, [120.0]);
    // Declared slots are what the policy is told; the site runs on its own.
    let sc = sim::parse_scenarios(&text(0.0, 10)).unwrap().remove(0).1;
    let r = sim::run(&sc, &policy("bulk"), 1, &SimOptions::default());
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.metrics.sites[0].peak_concurrency, 20, "the site's own 20 slots, not the 10 declared");
    for bad in ["poll_period = -1", "negotiation_period = inf", "declared_slots = 0"] {
        let text = format!(
            "[scenarios.b]\nn_jobs = 1\nbase_runtime = 1\nsites = [ {{ name = \"a\", slots = 1, {bad} }} ]\n"
        );
        let field = bad.split(' ').next().unwrap();
        let err = sim::parse_scenarios(&text).unwrap_err();
        assert!(err.contains("scenario b") && err.contains(field), "{bad}: {err}");
    }
}

/// The reference simulator's medians (shared/scenarios/README.md) for the
/// policies without judgement: the model is right only if these match.
#[test]
fn bulk_and_jobrouter_reproduce_the_reference_on_small_scenarios() {
    for (sc_name, pol, reference) in
        [("S1", "bulk", 12034.0), ("S1b", "bulk", 3023.0), ("S2", "bulk", 513.0), ("S2", "jobrouter", 1069.0)]
    {
        let sc = scenario(sc_name);
        let makespans: Vec<f64> = (1..=5)
            .map(|seed| {
                let r = sim::run(&sc, &policy(pol), seed, &SimOptions::default());
                assert!(r.errors.is_empty(), "{sc_name} {pol} seed {seed}: {:?}", r.errors);
                r.metrics.makespan.expect("finishes")
            })
            .collect();
        let m = median(makespans);
        assert!(
            (m / reference - 1.0).abs() < 0.05,
            "{sc_name} {pol}: median {m:.0} vs reference {reference}"
        );
    }
}

#[test]
fn the_oracle_beats_the_baselines_where_throttling_matters() {
    let sc = scenario("S1");
    let run = |name: &str| sim::run(&sc, &policy(name), 2, &SimOptions::default()).metrics.makespan.unwrap();
    let (oracle, jobrouter, bulk) = (run("oracle"), run("jobrouter"), run("bulk"));
    assert!(oracle < jobrouter && jobrouter < bulk, "seed 2: {oracle} {jobrouter} {bulk}");
    // Within 5% of the reference oracle (3313 s) or better.
    assert!(oracle < 3313.0 * 1.05, "seed 2: oracle {oracle}");
}

#[test]
fn the_oracle_runs_a_last_few_jobs_past_the_knee_where_that_ends_sooner() {
    // 50 jobs on a knee of 47 (beta 1): at the knee they run as 47 and then
    // 3, two run times; all at once, each 1.13 times slower. Bulk
    // submission does the latter; the oracle must not be slower than it.
    let text = "[scenarios.L]\nn_jobs = 50\nbase_runtime = 5000\njitter = 0.2\n\
                sites = [{ name = \"s\", slots = 1100, capacity = 47, beta = 1.0, wait_mean = 75 }]\n";
    for (seed, o) in oracle_not_slower_than_bulk(text, 1..=3) {
        // Two waves would take at least a shortest run (0.8 × 5000 s) more.
        assert!(o < 1.6 * 5000.0, "seed {seed}: oracle {o:.0} s, as if in two waves");
    }
}

/// Runs the one-scenario `text` with the oracle and bulk submission for
/// each seed, checks that the oracle ends no later (2% of slack) and
/// returns its makespans.
fn oracle_not_slower_than_bulk(text: &str, seeds: std::ops::RangeInclusive<u64>) -> Vec<(u64, f64)> {
    oracle_within_bulk(text, seeds, 1.02)
}

/// As [`oracle_not_slower_than_bulk`], the oracle's makespan at most
/// `factor` times bulk submission's.
fn oracle_within_bulk(text: &str, seeds: std::ops::RangeInclusive<u64>, factor: f64) -> Vec<(u64, f64)> {
    let (_, sc) = sim::parse_scenarios(text).expect("scenario parses").remove(0);
    seeds
        .map(|seed| {
            let run = |name: &str| sim::run(&sc, &policy(name), seed, &SimOptions::default());
            let (oracle, bulk) = (run("oracle"), run("bulk"));
            assert!(oracle.errors.is_empty() && !oracle.hang, "seed {seed}: {:?}", oracle.errors);
            let (o, b) = (oracle.metrics.makespan.unwrap(), bulk.metrics.makespan.unwrap());
            assert!(o <= b * factor, "seed {seed}: oracle {o:.0} s, bulk {b:.0} s");
            (seed, o)
        })
        .collect()
}

#[test]
fn the_oracle_queues_every_job_where_one_site_takes_them_all_and_only_its_slots_bind() {
    // Two waves of 25 on 25 slots, no knee, waits of 500 s for runs of
    // about 2,000 s. Nothing can run past the slots, so all 50 may wait
    // from the start and the second wave starts as the first ends; with
    // Little's law's six ahead, the second wave's waits came after the
    // first wave, and `adaptive`, whose queue ahead is longer, beat the
    // oracle (7,055–7,400 s against 6,532–7,141 s, warm). Bulk submission
    // does this; the oracle must not be slower than it.
    let text = "[scenarios.W]\nn_jobs = 50\nbase_runtime = 1500\njitter = 0.4\n\
                sites = [{ name = \"s\", slots = 25, speed = 0.7, wait_mean = 500 }]\n";
    oracle_not_slower_than_bulk(text, 1..=5);
}

#[test]
fn the_oracle_queues_every_job_where_one_site_only_shares_and_its_slots_hold_them_all() {
    // A knee of 19 that only shares (beta 0), 480 slots, 166 jobs, waits of
    // about 1,200 s for runs of about 1,350 s (held-out grid G1062). Past
    // the knee throughput stays flat, so nothing is lost running every job
    // at once, and each one's wait then passes from the start; held at the
    // knee with Little's law's few ahead, each wave waited after the last
    // and the oracle took 1.29 times bulk submission's makespan.
    let text = "[scenarios.P]\nn_jobs = 166\nbase_runtime = 1343\njitter = 0.38\n\
                sites = [{ name = \"s\", slots = 480, capacity = 19, beta = 0.0, wait_mean = 1194 }]\n";
    oracle_not_slower_than_bulk(text, 1..=3);
}

#[test]
fn the_oracle_queues_every_job_where_one_sites_waves_would_each_wait_after_the_last() {
    // A knee of 158 on 163 slots that thrashes a little (beta 0.5), waits
    // of about 370 s for runs of about 2,600 s, four waves (held-out grid
    // G1041). Little's law keeps some 22 jobs ahead, but a wave ends
    // together and the rest of it waits after it: held at the knee, the
    // oracle took 1.10 times bulk submission's makespan. Every slot busy
    // costs 1.6% of the knee's throughput and saves most of three waits.
    let text = "[scenarios.W]\nn_jobs = 655\nbase_runtime = 2271\njitter = 0.16\n\
                sites = [{ name = \"s\", slots = 163, capacity = 158, beta = 0.5, speed = 0.88, wait_mean = 367 }]\n";
    oracle_not_slower_than_bulk(text, 1..=3);
}

#[test]
fn the_oracle_keeps_the_knee_for_one_sites_last_waves_where_they_end_sooner_so() {
    // A knee of 36 on 43 slots that only shares, 50 jobs of about 3,500 s,
    // short waits (train grid G0185 without its dead site): 36 and then 14
    // at full speed take two runs, 43 at once slowed by 43/36 and then 7
    // take 2.2, as bulk submission runs them. Judged per job in steady
    // state, every slot busy looked no slower and the oracle lost 8.5%.
    let text = "[scenarios.L]\nn_jobs = 50\nbase_runtime = 3757\njitter = 0.11\n\
                sites = [{ name = \"s\", slots = 43, capacity = 36, beta = 0.0, speed = 1.07, wait_mean = 7 }]\n";
    oracle_within_bulk(text, 1..=3, 0.97);
}

#[test]
fn the_oracles_queue_ahead_does_not_collapse_a_site_that_thrashes() {
    // A knee of 11 that thrashes (beta 2), waits of 120 s for runs of 60 s:
    // Little's law keeps 22 jobs waiting, and if each job running past the
    // knee took only one job off that queue the site would settle with all
    // of them running, collapsed. The oracle knows the knee and the thrash:
    // it must not lose to `adaptive`, which knows neither.
    let text = "[scenarios.Q]\nn_jobs = 400\nbase_runtime = 60\njitter = 0.2\n\
                sites = [{ name = \"s\", slots = 60, capacity = 11, beta = 2.0, wait_mean = 120 }]\n";
    let (_, sc) = sim::parse_scenarios(text).expect("scenario parses").remove(0);
    for seed in 1..=5 {
        let run = |name: &str| sim::run(&sc, &policy(name), seed, &SimOptions::default());
        let (oracle, adaptive) = (run("oracle"), run("adaptive"));
        assert!(oracle.errors.is_empty() && !oracle.hang, "seed {seed}: {:?}", oracle.errors);
        let (o, a) = (oracle.metrics.makespan.unwrap(), adaptive.metrics.makespan.unwrap());
        assert!(o < a, "seed {seed}: oracle {o:.0} s, adaptive {a:.0} s");
        let peak = oracle.metrics.sites[0].peak_concurrency;
        assert!(peak <= 22, "seed {seed}: the oracle ran {peak} jobs at once on a knee of 11");
    }
}

/// Most attempts running at once at `site` over `[from, to)`, from the
/// attempts' own start and end times.
fn running_at_most(r: &sim::SimResult, site: u32, from: f64, to: f64) -> usize {
    let mut edges: Vec<(f64, i32)> = Vec::new();
    for a in r.attempts.iter().filter(|a| a.site == site) {
        let Some(start) = a.started else { continue };
        let end = a.ended.unwrap_or(f64::INFINITY);
        if start < to && end > from {
            edges.push((start.max(from), 1));
            edges.push((end, -1));
        }
    }
    // Ends before starts at the same instant: a slot freed and taken again.
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

#[test]
fn the_late_oracle_runs_the_first_window_until_a_job_ends_and_the_knee_after() {
    // One site of 600 slots, knee 200 (thrashing past it), waits of 10 s,
    // 3,000 jobs of about 500 s: fifteen waves at the knee. The late oracle
    // may know the knee only once a job has ended there; then it runs the
    // knee, as the oracle does from the start, so it loses at most about
    // the first run to it.
    let text = "[scenarios.K]\nn_jobs = 3000\nbase_runtime = 500\njitter = 0.2\n\
                sites = [{ name = \"s\", slots = 600, capacity = 200, beta = 1.0, wait_mean = 10 }]\n";
    let (_, sc) = sim::parse_scenarios(text).expect("scenario parses").remove(0);
    for seed in 1..=3 {
        let run = |name: &str| sim::run(&sc, &policy(name), seed, &SimOptions::default());
        let (late, oracle) = (run("late-oracle"), run("oracle"));
        assert!(late.errors.is_empty() && !late.hang, "seed {seed}: {:?}", late.errors);
        let first_end = (late.attempts.iter())
            .filter(|a| {
                a.end == sim::metrics::AttemptEnd::Success || a.end == sim::metrics::AttemptEnd::Failed
            })
            .filter_map(|a| a.ended)
            .fold(f64::INFINITY, f64::min);
        let before = running_at_most(&late, 0, 0.0, first_end);
        assert!(before <= 16, "seed {seed}: {before} jobs ran before the first ended at {first_end:.0} s");
        // Within a run time of the first end the site is at its knee.
        let after = running_at_most(&late, 0, first_end + 500.0, first_end + 1500.0);
        assert!((190..=210).contains(&after), "seed {seed}: {after} ran after the first end, knee 200");
        let (l, o) = (late.metrics.makespan.unwrap(), oracle.metrics.makespan.unwrap());
        assert!(l > o && l < o + 1.5 * 500.0, "seed {seed}: late oracle {l:.0} s, oracle {o:.0} s");
    }
}

// ------------------------------------------------------------ job types

fn mixed(name: &str) -> Scenario {
    let all =
        sim::load_scenarios(&util::shared().join("scenarios/mixed.toml")).expect("mixed scenarios load");
    all.into_iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("mixed scenario {name}")).1
}

fn parsed(text: &str) -> Scenario {
    sim::parse_scenarios(text).unwrap_or_else(|e| panic!("{e}")).remove(0).1
}

#[test]
fn one_type_of_load_1_written_as_types_runs_exactly_as_a_scenario_without_types() {
    let sites = "sites = [\n  { name = \"a\", slots = 40, capacity = 12, beta = 0.5, wait_mean = 30, p_fail = 0.05 },\n  \
                 { name = \"b\", slots = 20, capacity = 30, wait_mean = 200, speed = 1.3 },\n]\n";
    let plain = parsed(&format!("[scenarios.P]\nn_jobs = 300\nbase_runtime = 250\njitter = 0.3\n{sites}"));
    let typed = parsed(&format!(
        "[scenarios.T]\ntypes = [{{ name = \"only\", n_jobs = 300, base_runtime = 250, jitter = 0.3, load = 1.0 }}]\n\
         {sites}"
    ));
    assert_eq!(typed.types[0].name, "only");
    for p in ["bulk", "jobrouter", "oracle", "thesis", "adaptive"] {
        for seed in 1..=3 {
            let a = sim::run(&plain, &policy(p), seed, &SimOptions::default());
            let b = sim::run(&typed, &policy(p), seed, &SimOptions::default());
            assert!(
                a.errors.is_empty() && b.errors.is_empty(),
                "{p} seed {seed}: {:?} {:?}",
                a.errors,
                b.errors
            );
            assert_eq!(a.metrics, b.metrics, "{p} seed {seed}: metrics differ");
            assert_eq!(a.jobs, b.jobs, "{p} seed {seed}: jobs differ");
            assert!(b.metrics.types.is_empty(), "{p} seed {seed}: one type has no per-type figures");
        }
    }
}

#[test]
fn the_resource_slowdown_and_each_kinds_rate_follow_the_formula() {
    // C = 2, β = 0.5; two I/O jobs (load 1) and four CPU jobs (load 0.25,
    // half speed here), all of work 100, all starting at 0.
    // L = 2·1 + 4·0.25 = 3 > C: D = (3/2)(1 + 0.5·(3 − 2)/2) = 1.5 · 1.25 = 1.875.
    // I/O: 1/1.875 = 8/15 → they end at 100 · 15/8 = 187.5.
    // CPU: 0.5 / (0.75 + 0.25 · 1.875) = 0.5 / 1.21875 = 16/39; at 187.5 they
    // have done 3000/39; then L = 1 ≤ C and they run at 0.5, so the remaining
    // 900/39 take 1800/39: they end at 187.5 + 1800/39.
    let site = sim::SiteParams {
        capacity: Capacity::Finite(2.0),
        beta: 0.5,
        type_speed: [("cpu".to_string(), 0.5)].into(),
        ..sim::SiteParams::healthy("s", 10)
    };
    let types = [
        JobType { name: "io".into(), n_jobs: 2, base_runtime: 100.0, jitter: 0.0, load: 1.0 },
        JobType { name: "cpu".into(), n_jobs: 4, base_runtime: 100.0, jitter: 0.0, load: 0.25 },
    ];
    let truth = site.truth_for(&["io", "cpu"]);
    assert!((truth.slowdown(3.0, 2.0) - 1.875).abs() < 1e-12);
    assert_eq!(truth.slowdown(2.0, 2.0), 1.0, "no slowdown at the knee");
    assert!((truth.type_rate(0, 1.0, 3.0, 2.0) - 8.0 / 15.0).abs() < 1e-12);
    assert!((truth.type_rate(1, 0.25, 3.0, 2.0) - 16.0 / 39.0).abs() < 1e-12);
    assert_eq!(truth.type_rate(1, 0.0, 30.0, 2.0), 0.5, "a kind of load 0 never slows");

    let mut sim = sim::SiteSim::with_types(&site, &types, 1);
    for i in 0..6u64 {
        sim.submit_kind(0.0, sim::AttemptId(i), 100.0, if i < 2 { 0 } else { 1 });
    }
    let ends: Vec<(u64, f64)> = sim
        .advance(f64::INFINITY)
        .into_iter()
        .filter(|e| e.2 == sim::ModelEvent::Finished)
        .map(|e| (e.1 .0, e.0))
        .collect();
    assert_eq!(ends.len(), 6, "{ends:?}");
    for (attempt, at) in ends {
        let expected = if attempt < 2 { 187.5 } else { 187.5 + 1800.0 / 39.0 };
        assert!((at - expected).abs() < 1e-6, "attempt {attempt} ended at {at}, not {expected}");
    }
}

#[test]
fn kinds_are_interleaved_evenly_in_the_pool() {
    // Keys (i + 0.5)/n: io at 2/4000, 6/4000, …; cpu at 0.5/4000, 1.5/4000, ….
    let order: Vec<u16> = sim::model::interleave(&[1000, 4000]).iter().take(10).map(|t| t.0).collect();
    assert_eq!(order, [1, 1, 0, 1, 1, 1, 1, 0, 1, 1]);
    // Equal counts tie at every key: the kinds' order breaks the tie.
    let order: Vec<u16> = sim::model::interleave(&[3, 3]).iter().map(|t| t.0).collect();
    assert_eq!(order, [0, 1, 0, 1, 0, 1]);
    let one = sim::model::interleave(&[5]);
    assert!(one.len() == 5 && one.iter().all(|t| t.0 == 0));
}

#[test]
fn every_policy_conserves_every_job_of_every_kind_on_a_mixed_scenario() {
    let sc = mixed("M3");
    let n = |name: &str| sc.types.iter().find(|t| t.name == name).map(|t| t.n_jobs).expect("kind");
    for registered in cosched::policy::POLICIES {
        for blind_types in [false, true] {
            let seed = 1;
            let opts = SimOptions { blind_types, ..SimOptions::default() };
            let r = sim::run(&sc, &policy(registered.name), seed, &opts);
            let case =
                format!("M3 {} seed {seed}{}", registered.name, if blind_types { " blind" } else { "" });
            assert!(r.errors.is_empty(), "{case}: {:?}", r.errors);
            assert!(!r.hang, "{case}: hangs");
            assert_eq!(r.metrics.jobs_done, sc.n_jobs(), "{case}");
            let types = &r.metrics.types;
            assert_eq!(types.len(), 2, "{case}: per-type figures");
            assert_eq!((types[0].jobs_done, types[1].jobs_done), (n("io"), n("cpu")), "{case}");
            let last = types.iter().filter_map(|t| t.makespan).fold(0.0, f64::max);
            assert_eq!(Some(last), r.metrics.makespan, "{case}: the last kind ends the run");
            for t in types {
                assert_eq!(t.done_at.iter().sum::<u64>(), t.jobs_done, "{case}: {} by site", t.name);
            }
        }
    }
}

/// Issue 55: `adaptive`'s decisions in a run of several kinds say whose
/// they are: each kind's verdicts and windows name it, and a site's window
/// of all kinds together names none and is the kinds' windows added.
#[test]
fn adaptive_decisions_name_their_kind_and_a_sites_window_adds_its_kinds() {
    use cosched::policy::DecisionKind;
    use std::collections::BTreeMap;
    let sc = mixed("M3");
    let names: Vec<String> = sc.types.iter().map(|t| t.name.clone()).collect();
    for seed in 1..=2 {
        let r =
            sim::run(&sc, &policy("adaptive"), seed, &SimOptions { trace: true, ..SimOptions::default() });
        let case = format!("M3 adaptive seed {seed}");
        assert!(r.errors.is_empty(), "{case}: {:?}", r.errors);
        let mut verdicts_of = BTreeMap::new();
        // Per site, each kind's window in force, and the site's.
        let mut kind_window: BTreeMap<(u32, String), f64> = BTreeMap::new();
        for d in &r.decisions {
            match (&d.kind, &d.job_kind) {
                (DecisionKind::Verdict { .. }, None) => panic!("{case}: a verdict of no kind: {d:?}"),
                (DecisionKind::Verdict { .. }, Some(k)) => *verdicts_of.entry(k.clone()).or_insert(0) += 1,
                (DecisionKind::Window { window, .. }, Some(k)) => {
                    assert!(names.contains(k), "{case}: {d:?}");
                    kind_window.insert((d.site.0, k.clone()), *window);
                }
                (DecisionKind::Window { window, .. }, None) => {
                    let added: f64 =
                        kind_window.iter().filter(|((s, _), _)| *s == d.site.0).map(|(_, w)| w).sum();
                    assert_eq!(*window, added, "{case}: the site's window is its kinds' added: {d:?}");
                }
            }
        }
        for name in &names {
            assert!(verdicts_of.get(name) > Some(&0), "{case}: no verdict of {name}: {verdicts_of:?}");
        }
    }
}

/// Per kind and site, the spans over which the kind's window was under
/// its first window (`first`): from the window told under it to the kind's
/// next verdict there (the check below's end).
fn checks_below(decisions: &[cosched::policy::Decision], first: f64) -> Vec<(String, u32, f64, f64)> {
    use cosched::policy::DecisionKind;
    use std::collections::BTreeMap;
    let mut open: BTreeMap<(String, u32), f64> = BTreeMap::new();
    let mut spans = Vec::new();
    for d in decisions {
        let Some(kind) = &d.job_kind else { continue };
        let key = (kind.clone(), d.site.0);
        match d.kind {
            DecisionKind::Window { window, .. } if window < first => {
                open.entry(key).or_insert(d.at);
            }
            DecisionKind::Verdict { .. } => {
                if let Some(from) = open.remove(&key) {
                    spans.push((key.0, key.1, from, d.at));
                }
            }
            _ => {}
        }
    }
    spans.extend(open.into_iter().map(|((kind, site), from)| (kind, site, from, f64::INFINITY)));
    spans
}

/// Two healthy kinds, each held by its share of one site's slots under its
/// first window of 16, both check that window from below; one at a time,
/// since a check weighs runs at the level below against the floor's under
/// the load the other kinds put there then, and another kind draining
/// meanwhile would speed this kind's runs by its own drop.
#[test]
fn two_kinds_held_by_their_shares_check_their_first_windows_one_at_a_time() {
    let sc = parsed(
        "[scenarios.S]\ntypes = [\n  { name = \"a\", n_jobs = 200, base_runtime = 22, jitter = 0.1, load = 1.0 },\n  \
         { name = \"b\", n_jobs = 200, base_runtime = 22, jitter = 0.1, load = 0.5 },\n]\nsites = [\n  \
         { name = \"one\", slots = 24, wait_mean = 1 },\n]\n",
    );
    for seed in 1..=3 {
        let r =
            sim::run(&sc, &policy("adaptive"), seed, &SimOptions { trace: true, ..SimOptions::default() });
        assert!(r.errors.is_empty(), "seed {seed}: {:?}", r.errors);
        let spans = checks_below(&r.decisions, 16.0);
        assert!(spans.len() >= 2, "seed {seed}: both kinds check below: {spans:?}");
        for (i, a) in spans.iter().enumerate() {
            for b in &spans[i + 1..] {
                let overlap = a.0 != b.0 && a.1 == b.1 && a.2 < b.3 && b.2 < a.3;
                assert!(!overlap, "seed {seed}: two kinds check at once: {a:?} and {b:?}");
            }
        }
    }
}

/// While one kind checks its first window from below, the slots it drains
/// are not another kind's whose floor is unproven: the check weighs its
/// runs under the load the others put on the site at its floor, and the
/// other kind may be past its own knee (here the I/O kind, held by its
/// share to 12 beside the CPU kind's first window of 16, is: its knee is 6).
#[test]
fn a_kind_checking_below_keeps_its_slots_from_a_kind_whose_floor_is_unproven() {
    use cosched::policy::{CapacityMemory, JobId};
    let sc = one_site_of_io_and_cpu_jobs();
    let types = sim::run_spec(&sc, CapacityMemory::new()).types;
    let io = types.ids().find(|&t| types.name(t) == "io").expect("an io kind");
    for seed in 1..=3 {
        let opts = SimOptions { trace: true, keep_attempts: true, ..SimOptions::default() };
        let r = sim::run(&sc, &policy("adaptive"), seed, &opts);
        assert!(r.errors.is_empty(), "seed {seed}: {:?}", r.errors);
        let io_runs: Vec<(f64, f64)> = (r.attempts.iter())
            .filter(|a| types.of(JobId(a.job)) == io)
            .filter_map(|a| Some((a.started?, a.ended.unwrap_or(f64::INFINITY))))
            .collect();
        let cpu_checks: Vec<_> =
            checks_below(&r.decisions, 16.0).into_iter().filter(|c| c.0 == "cpu").collect();
        assert!(!cpu_checks.is_empty(), "seed {seed}: the CPU kind checks its first window");
        for (_, _, from, to) in cpu_checks {
            let most = (io_runs.iter())
                .filter(|&&(start, _)| start >= from && start < to)
                .map(|&(at, _)| io_runs.iter().filter(|&&(s, e)| s <= at && at < e).count())
                .max()
                .unwrap_or(0);
            assert!(
                most <= 12,
                "seed {seed}: {most} I/O jobs ran during the CPU kind's check ({from:.0}-{to:.0} s)"
            );
        }
    }
}

/// A site whose jobs wait far longer to start than they run takes a wait
/// to refill what a check below drains: a kind held there by its share
/// does not check its first window (the check would cost more than a run
/// of the slots it frees).
#[test]
fn a_kind_held_by_its_share_at_a_site_of_long_waits_keeps_its_first_window() {
    let sc = parsed(
        "[scenarios.S]\ntypes = [\n  { name = \"a\", n_jobs = 200, base_runtime = 22, jitter = 0.1, load = 1.0 },\n  \
         { name = \"b\", n_jobs = 200, base_runtime = 22, jitter = 0.1, load = 0.5 },\n]\nsites = [\n  \
         { name = \"one\", slots = 24, wait_mean = 200 },\n]\n",
    );
    for seed in 1..=3 {
        let r =
            sim::run(&sc, &policy("adaptive"), seed, &SimOptions { trace: true, ..SimOptions::default() });
        assert!(r.errors.is_empty(), "seed {seed}: {:?}", r.errors);
        let spans = checks_below(&r.decisions, 16.0);
        assert!(spans.is_empty(), "seed {seed}: checked below: {spans:?}");
        assert!(r.metrics.makespan.is_some(), "seed {seed}: the run ends");
    }
}

/// Two kinds on sites of 48 CPUs declared at 24 slots, which start at
/// once whatever they are sent: the kinds together run no more than the
/// declared slots (one over: a start seen a poll late at the polled site).
/// When one kind's share passes to the other, the first kind's jobs past
/// its new share still run until they end, and the other is granted those
/// slots only as they free.
#[test]
fn the_kinds_together_run_no_more_than_a_sites_declared_slots() {
    let sc = parsed(
        "[scenarios.S]\ntypes = [\n  { name = \"io\", n_jobs = 120, base_runtime = 22, jitter = 0.1, load = 1.0 },\n  \
         { name = \"cpu\", n_jobs = 240, base_runtime = 22, jitter = 0.1, load = 0.0 },\n]\nsites = [\n  \
         { name = \"cc\", slots = 48, declared_slots = 24, capacity = 6, beta = 1.0, wait_mean = 1, \
         negotiation_period = 5, poll_period = 5 },\n  \
         { name = \"local\", slots = 48, declared_slots = 24, capacity = 6, beta = 1.0, wait_mean = 1, \
         negotiation_period = 5 },\n]\n",
    );
    for seed in 1..=5 {
        let r = sim::run(&sc, &policy("adaptive"), seed, &SimOptions::default());
        assert!(r.errors.is_empty(), "seed {seed}: {:?}", r.errors);
        assert!(r.metrics.makespan.is_some(), "seed {seed}: the run ends");
        for site in &r.metrics.sites {
            assert!(
                site.peak_concurrency <= 24 + 1,
                "seed {seed}: {} ran {} jobs at once, declared at 24 slots",
                site.name,
                site.peak_concurrency
            );
        }
    }
}

/// A kind's ceiling seen while another kind took the site past its knee is
/// stale once that kind has left: the knee in its own jobs moved up by the
/// load that left. Here the short kind runs out by about 700 s; the long
/// kind, degraded at 33 under it, must try above 33 within two of its runs
/// after that, not wait to re-probe a level held ten runs (at about 3,500 s).
#[test]
fn a_ceiling_seen_under_another_kinds_overload_is_probed_again_once_that_kind_has_left() {
    use cosched::policy::{CapacityMemory, DecisionKind, JobId};
    let sc = parsed(
        "[scenarios.S]\ntypes = [\n  { name = \"long\", n_jobs = 660, base_runtime = 220, jitter = 0.05, load = 0.9 },\n  \
         { name = \"short\", n_jobs = 1000, base_runtime = 80, jitter = 0.2, load = 0.45 },\n]\nsites = [\n  \
         { name = \"one\", slots = 800, capacity = 120, beta = 0.2, wait_mean = 40 },\n]\n",
    );
    let types = sim::run_spec(&sc, CapacityMemory::new()).types;
    let short = types.ids().find(|&t| types.name(t) == "short").expect("a short kind");
    for seed in 1..=3 {
        let opts = SimOptions { trace: true, keep_attempts: true, ..SimOptions::default() };
        let r = sim::run(&sc, &policy("adaptive"), seed, &opts);
        assert!(r.errors.is_empty() && !r.hang, "seed {seed}: {:?}", r.errors);
        let short_gone = (r.attempts.iter())
            .filter(|a| types.of(JobId(a.job)) == short)
            .filter_map(|a| a.ended)
            .fold(0.0, f64::max);
        let long = |d: &&cosched::policy::Decision| d.job_kind.as_deref() == Some("long");
        let ceiling = (r.decisions.iter().filter(long))
            .filter(|d| d.at < short_gone)
            .filter_map(|d| match d.kind {
                DecisionKind::Verdict { healthy: false, level, .. } => Some(level),
                _ => None,
            })
            .fold(f64::INFINITY, f64::min);
        assert!(
            ceiling < 60.0,
            "seed {seed}: the long kind degraded under the short one's load ({ceiling:.0})"
        );
        let above = (r.decisions.iter().filter(long)).find(|d| {
            d.at > short_gone && matches!(d.kind, DecisionKind::Window { window, .. } if window > ceiling)
        });
        let above = above.map_or(f64::INFINITY, |d| d.at);
        assert!(
            above <= short_gone + 2.0 * 220.0,
            "seed {seed}: the short kind gone at {short_gone:.0} s, the long kind first above {ceiling:.0} at {above:.0} s"
        );
    }
}

/// The real pool's two-kinds case (two sites of 24 slots that start at
/// once, a file server serving 6 I/O jobs, beta 1): the I/O kind's checks
/// below go 16, 8, 4, and 4 is under its knee, so a check below 4 can only
/// find 2 as fast. Where a site starts at once, the CPU kind's jobs hold the
/// free slots and hand them over only as they end: the slots granted the
/// I/O kind meanwhile are what it runs, not what it is entitled to (half
/// the site), so they do not hold it at its floor and do not call for a
/// check below (one went to 2 in 6 of 8 seeds).
#[test]
fn a_kind_granted_slots_as_the_others_jobs_end_is_not_held_by_them() {
    use cosched::policy::DecisionKind;
    let sc = parsed(
        "[scenarios.S]\ntypes = [\n  { name = \"io\", n_jobs = 120, base_runtime = 22, jitter = 0.1, load = 1.0 },\n  \
         { name = \"cpu\", n_jobs = 240, base_runtime = 22, jitter = 0.1, load = 0.0 },\n]\nsites = [\n  \
         { name = \"local\", slots = 24, capacity = 6, beta = 1.0, wait_mean = 1, negotiation_period = 5 },\n  \
         { name = \"cc\", slots = 24, capacity = 6, beta = 1.0, wait_mean = 1, negotiation_period = 5, \
         poll_period = 5 },\n]\n",
    );
    for seed in 1..=8 {
        let r =
            sim::run(&sc, &policy("adaptive"), seed, &SimOptions { trace: true, ..SimOptions::default() });
        assert!(r.errors.is_empty(), "seed {seed}: {:?}", r.errors);
        assert!(r.metrics.makespan.is_some(), "seed {seed}: the run ends");
        let io_windows =
            (r.decisions.iter()).filter(|d| d.job_kind.as_deref() == Some("io")).filter_map(|d| {
                match d.kind {
                    DecisionKind::Window { window, .. } => Some((d.at, window)),
                    _ => None,
                }
            });
        for (at, window) in io_windows {
            assert!(window >= 4.0, "seed {seed}: the I/O kind's window went to {window} at {at:.0} s");
        }
    }
}

/// The healthy real-pool case, as the simulator can show it: `local` starts
/// its first window together after 8 s, `cc` starts nothing for its first
/// 40 s (on the real pool its forwarded jobs queue for the CPUs `local`'s
/// hold, and the gridmanager reports them late). A site none of whose jobs
/// started was taken to start them at once: the 8 jobs left in the pool
/// were kept for `cc` until its first start, while `local`'s slots stood
/// empty (on the real pool 11–26 s per slot, 23 s at a time).
#[test]
fn a_site_that_has_started_nothing_does_not_hold_the_pool_from_one_that_runs_jobs() {
    use cosched::policy::DecisionKind;
    let sc = parsed(
        "[scenarios.S]\nn_jobs = 40\nbase_runtime = 10\njitter = 0.5\nsites = [\n  \
         { name = \"local\", slots = 16, wait_mean = 0.1, negotiation_period = 8 },\n  \
         { name = \"cc\", slots = 16, wait_mean = 35, negotiation_period = 5, poll_period = 40 },\n]\n",
    );
    for seed in 1..=8 {
        let opts = SimOptions { trace: true, keep_attempts: true, ..SimOptions::default() };
        let r = sim::run(&sc, &policy("adaptive"), seed, &opts);
        assert!(r.errors.is_empty(), "seed {seed}: {:?}", r.errors);
        assert!(r.metrics.makespan.is_some(), "seed {seed}: the run ends");
        let verdict = (r.decisions.iter())
            .find(|d| d.site.0 == 0 && matches!(d.kind, DecisionKind::Verdict { .. }))
            .unwrap_or_else(|| panic!("seed {seed}: local's first window is judged"))
            .at;
        let mut sent: Vec<u64> =
            (r.attempts.iter()).filter(|a| a.submitted <= verdict + 1.0).map(|a| a.job).collect();
        sent.sort_unstable();
        sent.dedup();
        assert_eq!(
            sent.len(),
            40,
            "seed {seed}: {} of 40 jobs sent within 1 s of local's verdict at {verdict:.1} s, \
             with cc yet to start one",
            sent.len()
        );
    }
}

#[test]
fn a_site_whose_first_runs_end_is_refilled_while_another_has_run_nothing() {
    // `cc` starts its jobs only at its first cycle, 25 s in; `local`'s first
    // cohort of runs of 5–15 s ends from about 5 s on. Each of those ends
    // frees a slot the 8 jobs left should take at once: planned as if it
    // ran jobs in a second, `cc` looked able to end them all sooner.
    let sc = parsed(
        "[scenarios.S]\nn_jobs = 40\nbase_runtime = 10\njitter = 0.5\nsites = [\n  \
         { name = \"local\", slots = 16, wait_mean = 0.1 },\n  \
         { name = \"cc\", slots = 16, wait_mean = 1, negotiation_period = 25, poll_period = 5 },\n]\n",
    );
    for seed in 1..=8 {
        let opts = SimOptions { trace: true, keep_attempts: true, ..SimOptions::default() };
        let r = sim::run(&sc, &policy("adaptive"), seed, &opts);
        assert!(r.errors.is_empty(), "seed {seed}: {:?}", r.errors);
        let at_local: Vec<_> = r.attempts.iter().filter(|a| a.site == 0).collect();
        let mut ends: Vec<f64> = at_local.iter().filter_map(|a| a.ended).collect();
        ends.sort_by(f64::total_cmp);
        // From the third end of the first cohort on (two ends are the
        // least a run-time estimate is made of; before, no site's runs are
        // known and a site's first ends leave it running as it was), the
        // k-th end (k ≤ 8, the jobs left) sends the k-th job after it
        // within a second.
        let mut refills: Vec<f64> = at_local.iter().map(|a| a.submitted).filter(|&t| t > 0.0).collect();
        refills.sort_by(f64::total_cmp);
        for (k, end) in ends.iter().enumerate().take(8).skip(2) {
            let refill = refills.get(k).copied().unwrap_or(f64::INFINITY);
            assert!(
                refill <= end + 1.0,
                "seed {seed}: local's end {} at {end:.1} s was refilled only at {refill:.1} s",
                k + 1
            );
        }
    }
}

#[test]
fn bulk_gives_every_site_the_same_mix_of_kinds() {
    // M3: 750 I/O and 1,500 CPU jobs over 300 and 100 slots, split 3:1.
    let r = sim::run(&mixed("M3"), &policy("bulk"), 2, &SimOptions::default());
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let (io, cpu) = (&r.metrics.types[0].done_at, &r.metrics.types[1].done_at);
    assert_eq!(io[0] + cpu[0], 1688, "fast's share of 2,250 by slots");
    // The pool interleaves one I/O job per two CPU jobs, so each share holds
    // a third of I/O jobs, to one job.
    for site in 0..2 {
        let third = (io[site] + cpu[site]) as f64 / 3.0;
        assert!(
            (io[site] as f64 - third).abs() <= 1.0,
            "site {site}: {} I/O of {}",
            io[site],
            io[site] + cpu[site]
        );
    }
}

#[test]
fn the_type_aware_oracle_keeps_one_sites_io_jobs_at_its_server_and_fills_the_slots_with_cpu_jobs() {
    // M2: one site of 500 slots, C = 50; 1000 I/O jobs of 400 s (load 1),
    // 4000 CPU jobs of 1200 s (load 0.03). Worked by hand: with every job at
    // full speed both kinds end together at T with 400,000/T I/O jobs and
    // 4,800,000/T CPU jobs running; the load 544,000/T ≤ 50 binds before
    // the slots (5,200,000/T ≤ 500): T = 10,880 s. Blind to kinds, the
    // oracle holds the site to 50 jobs of any kind: 104,000 s of work.
    let sc = mixed("M2");
    for seed in 1..=3 {
        let typed = sim::run(&sc, &policy("oracle"), seed, &SimOptions::default());
        let blind = SimOptions { blind_types: true, ..SimOptions::default() };
        let blind = sim::run(&sc, &policy("oracle"), seed, &blind);
        assert!(typed.errors.is_empty() && blind.errors.is_empty(), "seed {seed}");
        let (t, b) = (typed.metrics.makespan.expect("ends"), blind.metrics.makespan.expect("ends"));
        assert!(
            (0.95 * 10_880.0..=1.15 * 10_880.0).contains(&t),
            "seed {seed}: {t:.0} s against the bound 10,880"
        );
        assert!(b >= 5.0 * t, "seed {seed}: blind {b:.0} s, typed {t:.0} s");
    }
}

/// Two sites of 100 slots: `disk` has a server for 100 I/O jobs, `cloud`
/// one for 5; 1000 I/O jobs (load 1) and 1000 CPU jobs (load 0.01) of 300 s.
fn disk_and_cloud() -> Scenario {
    parsed(
        "[scenarios.P]\ntypes = [\n  { name = \"io\", n_jobs = 1000, base_runtime = 300, load = 1.0 },\n  \
         { name = \"cpu\", n_jobs = 1000, base_runtime = 300, load = 0.01 },\n]\nsites = [\n  \
         { name = \"disk\", slots = 100, capacity = 100, beta = 0.5 },\n  \
         { name = \"cloud\", slots = 100, capacity = 5, beta = 0.5 },\n]\n",
    )
}

#[test]
fn the_type_aware_oracle_sends_each_kind_where_it_runs_best() {
    // Two sites of 100 slots: `disk` has a server for 100 I/O jobs, `cloud`
    // one for 5. 1000 I/O and 1000 CPU jobs of 300 s. By hand: `cloud` can
    // run CPU jobs (load 0.01) on all its slots but at most 5 I/O jobs, so
    // the mix ends both kinds together at 3,000 s with (nearly) every I/O
    // job at `disk` and every CPU job at `cloud`; bulk's split by slots
    // runs 50 I/O jobs on a server for 5 at `cloud`.
    let sc = disk_and_cloud();
    for seed in 1..=3 {
        let r = sim::run(&sc, &policy("oracle"), seed, &SimOptions::default());
        assert!(r.errors.is_empty(), "seed {seed}: {:?}", r.errors);
        let (io, cpu) = (&r.metrics.types[0].done_at, &r.metrics.types[1].done_at);
        assert!(io[0] >= 900, "seed {seed}: {} of 1000 I/O jobs at disk", io[0]);
        assert!(cpu[1] >= 850, "seed {seed}: {} of 1000 CPU jobs at cloud", cpu[1]);
        let t = r.metrics.makespan.expect("ends");
        assert!(t <= 1.15 * 3000.0, "seed {seed}: {t:.0} s against 3,000 by hand");
        let bulk = sim::run(&sc, &policy("bulk"), seed, &SimOptions::default());
        assert!(t < bulk.metrics.makespan.expect("ends"), "seed {seed}: no faster than bulk");
    }
}

#[test]
fn adaptive_fills_a_site_with_cpu_jobs_where_its_server_takes_few_io_jobs() {
    // `disk_and_cloud`: `cloud`'s server holds 5 I/O jobs, its 100 slots
    // far more CPU jobs (load 0.01). Blind to kinds, `adaptive` finds one
    // knee of about 5 jobs of any kind there and leaves 95 slots idle; with
    // a controller per kind the CPU jobs fill them, and `cloud` runs most
    // of them.
    let sc = disk_and_cloud();
    for seed in 1..=3 {
        let typed = sim::run(&sc, &policy("adaptive"), seed, &SimOptions::default());
        let blind = SimOptions { blind_types: true, ..SimOptions::default() };
        let blind = sim::run(&sc, &policy("adaptive"), seed, &blind);
        assert!(typed.errors.is_empty() && blind.errors.is_empty(), "seed {seed}");
        let (t, b) = (typed.metrics.makespan.expect("ends"), blind.metrics.makespan.expect("ends"));
        assert!(t <= 0.9 * b, "seed {seed}: typed {t:.0} s, blind {b:.0} s");
        let (io, cpu) = (&typed.metrics.types[0].done_at, &typed.metrics.types[1].done_at);
        assert!(cpu[1] > 500, "seed {seed}: {} of 1000 CPU jobs at cloud", cpu[1]);
        assert!(io[0] > 900, "seed {seed}: {} of 1000 I/O jobs at disk", io[0]);
    }
}

#[test]
fn a_kind_of_long_runs_climbs_as_far_as_the_site_was_seen_healthy_with_every_kind() {
    // One site of 400 slots whose server holds 300 jobs; 2,000 quick jobs
    // (60 s) and 300 long ones (1,200 s, load 0.02). The quick kind's
    // verdicts show within minutes that the site runs hundreds of jobs
    // healthy. The long kind's first cohort is its baseline (a run); its
    // first probe may then go as far as the site was seen healthy, and the
    // rest of its jobs run at once: about two runs and the waits. Climbing
    // one probe per run of its own (16, 32, …, 256) takes four or more.
    let sc = parsed(
        "[scenarios.W]\ntypes = [\n  { name = \"quick\", n_jobs = 2000, base_runtime = 60, jitter = 0.2, load = 1.0 },\n  \
         { name = \"long\", n_jobs = 300, base_runtime = 1200, jitter = 0.2, load = 0.02 },\n]\nsites = [\n  \
         { name = \"big\", slots = 400, capacity = 300, beta = 0.5, wait_mean = 10 },\n]\n",
    );
    for seed in 1..=3 {
        let long = long_kinds_makespan(&sc, seed, &SimOptions::default());
        assert!(long <= 2.5 * 1200.0, "seed {seed}: the long kind took {long:.0} s");
    }
}

/// `adaptive`'s run of `sc` (its second kind the long one): when that kind
/// ended, the run free of conservation errors.
fn long_kinds_makespan(sc: &Scenario, seed: u64, options: &SimOptions) -> f64 {
    let r = sim::run(sc, &policy("adaptive"), seed, options);
    assert!(r.errors.is_empty(), "seed {seed}: {:?}", r.errors);
    r.metrics.types[1].makespan.expect("the long kind ends")
}

#[test]
fn a_kind_whose_jobs_ran_out_leaves_its_share_of_the_slots_to_the_others() {
    // One site of 100 slots and no knee; 400 quick jobs (100 s) and 200
    // long ones (1,000 s). Warm, both kinds start at the slots they
    // remember, and each holds half of them while both have jobs left. By
    // hand: the quick kind ends near 800 s; with all 100 slots after that,
    // the long kind's 200,000 s of work end near 2,400 s (the work over the
    // slots), its last wave near 3,000 s. Kept to the half it held while
    // both ran (no window of its own changes again: it is warm), it ends
    // past 4,000 s.
    let sc = parsed(
        "[scenarios.Q]\ntypes = [\n  { name = \"quick\", n_jobs = 400, base_runtime = 100, jitter = 0.2, load = 0.0 },\n  \
         { name = \"long\", n_jobs = 200, base_runtime = 1000, jitter = 0.2, load = 0.0 },\n]\nsites = [\n  \
         { name = \"one\", slots = 100, wait_mean = 10 },\n]\n",
    );
    for seed in 1..=3 {
        let cold = sim::run(&sc, &policy("adaptive"), seed, &SimOptions::default());
        let warm = SimOptions { memory: cold.learned.clone(), ..SimOptions::default() };
        let long = long_kinds_makespan(&sc, seed, &warm);
        assert!(long <= 3400.0, "seed {seed}: the long kind took {long:.0} s");
    }
}

/// One site of 24 slots whose file server serves 6 I/O jobs (beta 1), 120
/// I/O jobs (load 1) and 240 CPU jobs (load 0) of 22 s: the real pool's
/// two-kinds case at one site.
fn one_site_of_io_and_cpu_jobs() -> Scenario {
    parsed(
        "[scenarios.S]\ntypes = [\n  { name = \"io\", n_jobs = 120, base_runtime = 22, jitter = 0.1, load = 1.0 },\n  \
         { name = \"cpu\", n_jobs = 240, base_runtime = 22, jitter = 0.1, load = 0.0 },\n]\nsites = [\n  \
         { name = \"one\", slots = 24, capacity = 6, beta = 1.0, wait_mean = 1 },\n]\n",
    )
}

#[test]
fn a_kind_its_share_of_the_slots_holds_under_its_first_window_checks_that_window_from_below() {
    // One site of 24 slots whose file server serves 6 I/O jobs (beta 1),
    // 120 I/O jobs and 240 CPU jobs of 22 s. Both kinds want the slots, so
    // each is held to half of them, 12, under its first window of 16: the
    // I/O kind's probe above its floor can never run, so no probe proves
    // that floor slowed. By hand: held at 12 all run, every I/O job runs
    // (12 / 6)² = 4 times slow and the kind's 2,640 s of work take 880 s
    // (3 jobs' worth at a time); at the knee they take 440 s, plus its first
    // cohort (88 s) and a check below. Between the two: 760 s.
    let sc = one_site_of_io_and_cpu_jobs();
    for seed in 1..=3 {
        let r = sim::run(&sc, &policy("adaptive"), seed, &SimOptions::default());
        assert!(r.errors.is_empty(), "seed {seed}: {:?}", r.errors);
        let io = r.metrics.types[0].makespan.expect("the I/O kind ends");
        assert!(io < 760.0, "seed {seed}: the I/O kind took {io:.0} s");
    }
}

#[test]
fn bad_types_are_diagnosed_with_the_scenario_the_field_and_what_to_do() {
    let sites = "sites = [{ name = \"a\", slots = 4 }]\n";
    let io = "{ name = \"io\", n_jobs = 5, base_runtime = 10, load = 1.0 }";
    let cases = [
        (format!("[scenarios.B]\nn_jobs = 5\nbase_runtime = 10\ntypes = [{io}]\n{sites}"), ["scenario B", "`types` replaces"]),
        (
            format!("[scenarios.L]\ntypes = [{{ name = \"x\", n_jobs = 5, base_runtime = 10, load = 1.5 }}]\n{sites}"),
            ["scenario L", "type x: load = 1.5 is outside [0, 1]"],
        ),
        (
            format!("[scenarios.U]\ntypes = [{io}]\nsites = [{{ name = \"a\", slots = 4, type_speed = {{ cpu = 0.5 }} }}]\n"),
            ["site a: type_speed names type \"cpu\"", "the scenario's types are io"],
        ),
        (
            "[scenarios.N]\nn_jobs = 5\nbase_runtime = 10\nsites = [{ name = \"a\", slots = 4, type_speed = { cpu = 0.5 } }]\n"
                .to_string(),
            ["scenario N", "the scenario has no `types`"],
        ),
        (format!("[scenarios.D]\ntypes = [{io}, {io}]\n{sites}"), ["scenario D", "two types have this name"]),
        (format!("[scenarios.M]\njitter = 0.1\n{sites}"), ["scenario M", "needs `n_jobs`"]),
    ];
    for (text, wanted) in cases {
        let err = sim::parse_scenarios(&text).unwrap_err();
        for w in wanted {
            assert!(err.contains(w), "{err:?} does not say {w:?}\n{text}");
        }
    }
}

// ------------------------------------------------------------ holds

/// Each (job, site) pair held more than once, and each site's holds.
fn holds(r: &sim::SimResult, n_sites: usize) -> (Vec<(u64, u32)>, Vec<usize>) {
    let mut seen = std::collections::BTreeMap::new();
    let mut at = vec![0; n_sites];
    for a in r.attempts.iter().filter(|a| a.end == sim::metrics::AttemptEnd::Held) {
        *seen.entry((a.job, a.site)).or_insert(0) += 1;
        at[a.site as usize] += 1;
    }
    (seen.into_iter().filter(|&(_, k)| k > 1).map(|(pair, _)| pair).collect(), at)
}

#[test]
fn a_job_held_for_a_cause_of_the_site_moves_elsewhere_after_its_first_hold_there() {
    // Site a lacks the input of about a third of the jobs (each held there
    // on every attempt); b has all of it. Until issue 56 a held job went
    // back to the pool, lowest index first, and the fastest site with room
    // took it again: bulk held each 20 times (SIM_MAX_ATTEMPTS) at a and
    // gave it up, adaptive sent it back to a while a kept its room.
    let sc = parsed(
        "[scenarios.H]\nn_jobs = 200\nbase_runtime = 100\njitter = 0.2\n\
         sites = [{ name = \"a\", slots = 30, p_hold = 0.3 }, { name = \"b\", slots = 20, wait_mean = 20 }]\n",
    );
    for registered in cosched::policy::POLICIES {
        for seed in 1..=3 {
            let case = format!("{} seed {seed}", registered.name);
            let r = sim::run(&sc, &policy(registered.name), seed, &SimOptions::default());
            assert!(r.errors.is_empty(), "{case}: {:?}", r.errors);
            assert!(!r.hang, "{case}: hangs");
            assert_eq!(r.metrics.jobs_done, 200, "{case}: every job done");
            let (twice, at) = holds(&r, 2);
            assert!(twice.is_empty(), "{case}: (job, site) held more than once: {twice:?}");
            assert!(at[0] > 20 && at[1] == 0, "{case}: holds by site {at:?}");
            // A job held at a ran at b.
            for a in r.attempts.iter().filter(|a| a.end == sim::metrics::AttemptEnd::Held) {
                assert_eq!(r.jobs[a.job as usize].site, 1, "{case}: job {} held at a ran at a", a.job);
            }
        }
    }
}

#[test]
fn a_site_that_holds_every_job_it_gets_is_given_up_like_a_dead_one() {
    // Site a holds every job (its input is missing for all), b has room for
    // all. adaptive gives a up after its first window of 16, all held, and
    // tries it again with one job only after twice the idle timeout (2,400
    // s), which the run (200 jobs of 100 s on 20 slots) does not reach.
    let sc = parsed(
        "[scenarios.D]\nn_jobs = 200\nbase_runtime = 100\njitter = 0.2\n\
         sites = [{ name = \"a\", slots = 20, p_hold = 1 }, { name = \"b\", slots = 20 }]\n",
    );
    for seed in 1..=3 {
        let r = sim::run(&sc, &policy("adaptive"), seed, &SimOptions::default());
        assert!(r.errors.is_empty() && !r.hang, "seed {seed}: {:?}", r.errors);
        assert_eq!(r.metrics.jobs_done, 200, "seed {seed}");
        let (twice, at) = holds(&r, 2);
        assert!(twice.is_empty(), "seed {seed}: held twice at a site: {twice:?}");
        assert!((1..=16).contains(&at[0]), "seed {seed}: a held {} jobs", at[0]);
        assert!(r.metrics.makespan.unwrap() < 2400.0, "seed {seed}: {:?}", r.metrics.makespan);
    }
}

#[test]
fn a_job_every_live_site_held_is_given_up_instead_of_waiting_for_good() {
    // Both sites hold every job: each job is held once at each and given
    // up, and the run settles (a bar that waited for a site able to take
    // the job would leave it in the pool for good).
    let both = parsed(
        "[scenarios.B]\nn_jobs = 40\nbase_runtime = 100\n\
         sites = [{ name = \"a\", slots = 8, p_hold = 1 }, { name = \"b\", slots = 8, p_hold = 1 }]\n",
    );
    for registered in cosched::policy::POLICIES {
        let case = registered.name;
        let r = sim::run(&both, &policy(case), 1, &SimOptions::default());
        assert!(r.errors.is_empty(), "{case}: {:?}", r.errors);
        assert!(!r.hang, "{case}: hangs");
        assert_eq!(r.metrics.jobs_done, 0, "{case}");
        let (twice, _) = holds(&r, 2);
        assert!(twice.is_empty(), "{case}: held twice at a site: {twice:?}");
    }
    // a holds every job, b starts none: once b is given up as dead, no
    // live site is left for a job a held.
    let dead = parsed(
        "[scenarios.X]\nn_jobs = 10\nbase_runtime = 100\n\
         sites = [{ name = \"a\", slots = 8, p_hold = 1 }, { name = \"b\", slots = 8, dead = true }]\n",
    );
    let r = sim::run(&dead, &policy("adaptive"), 1, &SimOptions::default());
    assert!(r.errors.is_empty() && !r.hang, "a holds, b dead: {:?} (hang {})", r.errors, r.hang);
    let (twice, at) = holds(&r, 2);
    assert!(twice.is_empty() && at[0] == 10, "a holds, b dead: held twice {twice:?}, holds {at:?}");
}

#[test]
fn p_hold_is_a_share() {
    for bad in ["p_hold = -0.1", "p_hold = 1.5"] {
        let text = format!(
            "[scenarios.P]\nn_jobs = 1\nbase_runtime = 1\nsites = [{{ name = \"a\", slots = 1, {bad} }}]\n"
        );
        let err = sim::parse_scenarios(&text).unwrap_err();
        assert!(err.contains("scenario P") && err.contains("p_hold must be in [0, 1]"), "{bad}: {err}");
    }
}
