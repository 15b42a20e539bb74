//! Integration tests: the `thesis` and `adaptive` policies driven through the
//! simulated grid (`cosched::sim::run`, virtual time, deterministic by seed)
//! on the scenarios of `shared/scenarios`. Reference numbers are the
//! independent reference simulator's, from `shared/scenarios/README.md`.

use crate::util::{self, at};
use cosched::policy::{CapacityMemory, PolicyConfig, SiteMemory};
use cosched::sim::{self, Scenario, SimOptions, SimResult};

fn scenario(name: &str) -> Scenario {
    sim::load_scenarios(&util::shared().join("scenarios/scenarios.toml"))
        .expect("shared scenarios load")
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("scenario {name}"))
        .1
}

fn run(name: &str, policy: &str, seed: u64, opts: &SimOptions) -> SimResult {
    let config = PolicyConfig::named(policy).expect("known policy");
    let result = sim::run(&scenario(name), &config, seed, opts);
    assert!(result.errors.is_empty(), "{name}/{policy} seed {seed}: {:?}", result.errors);
    assert!(!result.hang, "{name}/{policy} seed {seed} hangs");
    util::assert_woken_by_events(&result, &format!("{name}/{policy} seed {seed}"));
    result
}

fn makespan(r: &SimResult) -> f64 {
    r.metrics.makespan.expect("a settled run has a makespan")
}

#[test]
fn thesis_reproduces_the_reference_makespans_of_single_site_scenarios() {
    // Reference thesis makespans (medians of 5 seeds); one seed must be within ±30%.
    for (name, reference) in [("S1", 6232.0), ("S2", 4349.0), ("S5", 8677.0)] {
        let seed = 1;
        let m = makespan(&run(name, "thesis", seed, &SimOptions::default()));
        let ratio = m / reference;
        assert!(
            (0.7..=1.3).contains(&ratio),
            "{name} seed {seed}: thesis {m:.0} s vs reference {reference} ({ratio:.2})"
        );
    }
}

#[test]
fn adaptive_beats_thesis_and_bulk_where_contention_hurts_and_probes_cheaply_where_it_does_not() {
    let opts = SimOptions::default();
    for seed in [1, 2] {
        let adaptive = makespan(&run("S1", "adaptive", seed, &opts));
        let thesis = makespan(&run("S1", "thesis", seed, &opts));
        let bulk = makespan(&run("S1", "bulk", seed, &opts));
        assert!(adaptive < 0.8 * thesis, "S1 seed {seed}: adaptive {adaptive:.0} vs thesis {thesis:.0}");
        assert!(adaptive < 0.5 * bulk, "S1 seed {seed}: adaptive {adaptive:.0} vs bulk {bulk:.0}");
        // S2 has no contention: the oracle's 513 s is bulk's. Doubling from
        // 16 to 375 jobs costs a test per level (each a fraction of the 400 s
        // run): 2.96–3.35× for seeds 1–5 since the test profiles the
        // baseline's scale on both sides (2.55–3.04× before, when a level
        // was sometimes passed 50 s after it was reached, on evidence from
        // jobs that had barely run there). Issue 13 asks for 2×, which a cold
        // controller can only reach by growing faster than its tests can
        // judge (see BENCHMARKS.md); tighten this when it does.
        let s2 = makespan(&run("S2", "adaptive", seed, &opts));
        assert!(s2 <= 3.5 * 513.0, "S2 seed {seed}: adaptive {s2:.0} s");
    }
}

/// S2 under adaptive with its site's own `initial_window` and `memory`.
fn s2_with_operators_window(window: u32, memory: CapacityMemory, seed: u64) -> SimResult {
    let s2 = scenario("S2");
    let mut spec = sim::run_spec(&s2, memory);
    spec.sites[0].initial_window = Some(window);
    let config = PolicyConfig::named("adaptive").expect("known policy");
    let policy = cosched::policy::build(&config, &spec, None).expect("adaptive needs no truth");
    let result = sim::run_built(&s2, policy, seed, &SimOptions::default());
    assert!(result.errors.is_empty(), "seed {seed}: {:?}", result.errors);
    assert_eq!(result.metrics.jobs_done, s2.n_jobs(), "seed {seed}");
    result
}

#[test]
fn a_site_started_at_its_own_initial_window_runs_as_fast_as_bulk_submission() {
    // S2's site has no shared bottleneck. An operator who knows that says so
    // with `initial_window = 400` in its [[site]] table, and the ramp that
    // costs a cold run about three times bulk's makespan (the test above)
    // is skipped: the first window is every job. So it is where a run
    // remembers less of the site (16 jobs healthy, nothing seen above), but
    // not where a run saw it degraded at 50: that is evidence against the
    // operator's word.
    let site = scenario("S2").sites[0].name.clone();
    let remembered = |ceiling: Option<f64>| {
        util::remembered(&site, SiteMemory { capacity: Some(16.0), ceiling, ..Default::default() })
    };
    for seed in 1..=3 {
        let bulk = makespan(&run("S2", "bulk", seed, &SimOptions::default()));
        for (memory, what) in [(CapacityMemory::new(), "cold"), (remembered(None), "16 remembered healthy")] {
            let hinted = makespan(&s2_with_operators_window(400, memory, seed));
            assert!(
                hinted <= 1.1 * bulk,
                "S2 seed {seed}, {what}: from 400 jobs {hinted:.0} s, bulk {bulk:.0} s"
            );
        }
        let seen_degraded = s2_with_operators_window(400, remembered(Some(50.0)), seed);
        assert!(
            makespan(&seen_degraded) > 2.0 * bulk,
            "S2 seed {seed}: a window of 400 over a run's degraded verdict at 50: {:.0} s, bulk {bulk:.0} s",
            makespan(&seen_degraded)
        );
    }
}

#[test]
fn a_capacity_remembered_without_run_times_is_a_first_window_not_a_pin() {
    // A state from before run times were kept, or a first cohort given up
    // on, leaves a capacity with no run-time distribution. A warm start
    // past it learns no baseline there (its runs are past the level known
    // healthy), so no test could ever move the window: S2 took 5,055 s from
    // a remembered 16, three times a cold run. The level is a first window
    // instead, probed from once its runs are in.
    let site = scenario("S2").sites[0].name.clone();
    let memory = util::remembered(&site, SiteMemory { capacity: Some(16.0), ..Default::default() });
    for seed in 1..=3 {
        let cold = makespan(&run("S2", "adaptive", seed, &SimOptions::default()));
        let warm = makespan(&run(
            "S2",
            "adaptive",
            seed,
            &SimOptions { memory: memory.clone(), ..Default::default() },
        ));
        assert!(
            warm <= 1.1 * cold,
            "S2 seed {seed}: from a remembered 16 without run times {warm:.0} s, cold {cold:.0} s"
        );
    }
    // A run too short to learn the baseline there (4 jobs, where a verdict
    // needs 8 ended) still keeps the capacity it was given.
    let mut short = scenario("S2");
    short.set_n_jobs(4);
    let site = short.sites[0].name.clone();
    let config = PolicyConfig::named("adaptive").expect("known policy");
    let r = sim::run(&short, &config, 1, &SimOptions { memory, ..Default::default() });
    assert_eq!(r.metrics.jobs_done, 4, "{:?}", r.errors);
    assert_eq!(at(&r.learned, &site).capacity, Some(16.0), "{:?}", at(&r.learned, &site));
}

#[test]
fn adaptive_moves_the_jobs_of_a_dead_site_elsewhere() {
    let seed = 1;
    let r = run("S6", "adaptive", seed, &SimOptions::default());
    assert_eq!(r.metrics.jobs_done, 1000, "seed {seed}");
    let dead = r.metrics.sites.iter().find(|s| s.name == "X").expect("site X");
    assert_eq!(dead.jobs_done, 0, "seed {seed}");
    let thesis = makespan(&run("S6", "thesis", seed, &SimOptions::default()));
    assert!(makespan(&r) < thesis, "seed {seed}: adaptive {:.0} vs thesis {thesis:.0}", makespan(&r));
    assert!(at(&r.learned, "X").unresponsive, "seed {seed}: {:?}", r.learned);
}

#[test]
fn a_warm_start_learns_the_knee_and_starts_there() {
    let seed = 3;
    let cold = run("S1", "adaptive", seed, &SimOptions::default());
    let capacity = at(&cold.learned, "site").capacity.expect("a capacity was learned");
    // The true knee is 50; the search may end a little either side of it.
    assert!((30.0..=70.0).contains(&capacity), "seed {seed}: learned {capacity}");
    let warm =
        run("S1", "adaptive", seed, &SimOptions { memory: cold.learned.clone(), ..SimOptions::default() });
    assert!(
        makespan(&warm) < makespan(&cold),
        "seed {seed}: warm {:.0} vs cold {:.0}",
        makespan(&warm),
        makespan(&cold)
    );
    // 3313 s is the oracle's median on S1.
    assert!(makespan(&warm) <= 1.15 * 3313.0, "seed {seed}: warm {:.0}", makespan(&warm));
}

#[test]
fn runs_are_deterministic_by_seed() {
    let opts = SimOptions { trace: true, ..SimOptions::default() };
    for policy in ["thesis", "adaptive"] {
        let a = run("S3", policy, 4, &opts);
        let b = run("S3", policy, 4, &opts);
        assert_eq!(a.metrics.makespan, b.metrics.makespan, "{policy} seed 4");
        assert_eq!(a.trace, b.trace, "{policy} seed 4");
    }
}

#[test]
fn thesis_compares_each_kind_of_job_with_its_own_and_finishes_a_mix_of_kinds() {
    // M2: one site, I/O jobs of ~400 s and CPU jobs of ~1200 s interleaved.
    // Compared with one T1 for all, a batch's turnaround reads the mix, not
    // contention: T1 sank to the I/O jobs', every batch holding a CPU job
    // read degraded, the capacity search ended at one job and seeds 2 and 5
    // reached the 30-day horizon with about half the jobs done.
    let (_, m2) = sim::load_scenarios(&util::shared().join("scenarios/mixed.toml"))
        .expect("mixed scenarios load")
        .into_iter()
        .find(|(n, _)| n == "M2")
        .expect("scenario M2");
    let config = PolicyConfig::named("thesis").expect("known policy");
    for seed in 1..=5 {
        let r = sim::run(&m2, &config, seed, &SimOptions { keep_attempts: false, ..SimOptions::default() });
        assert!(r.errors.is_empty(), "M2 thesis seed {seed}: {:?}", r.errors);
        assert!(!r.hang, "M2 thesis seed {seed}: {} of 5000 jobs done at the horizon", r.metrics.jobs_done);
        // The reference's type-blind thesis: a median of 33,339 s.
        assert!(makespan(&r) < 2.0 * 33_339.0, "M2 thesis seed {seed}: {:.0} s", makespan(&r));
    }
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &std::path::Path, into: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|x| x == "rs") {
            into.push(path);
        }
    }
}

#[test]
fn the_policy_core_reads_no_clock_file_or_environment_and_imports_no_outer_layer() {
    // The invariant of `lib.rs`: `policy` is pure, so replay, simulation,
    // the daemon and a restored checkpoint all decide alike. An environment
    // knob or a clock read left in it (as an experiment's hook once was)
    // would make a run depend on where it runs.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/policy");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() >= 5, "found only {} files under {}", files.len(), root.display());
    let forbidden = [
        "std::env",
        "std::fs",
        "std::process",
        "std::net",
        "std::thread",
        "Instant",
        "SystemTime",
        "tokio::",
        "print!(",
        "println!(",
        "dbg!(",
    ];
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a source file reads");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let outer_import = code.contains("crate::") && !code.contains("crate::policy");
            if let Some(token) = forbidden.iter().find(|t| code.contains(*t)) {
                found.push(format!("{}:{}: {token}", file.display(), n + 1));
            }
            if outer_import {
                found.push(format!("{}:{}: imports an outer layer: {}", file.display(), n + 1, code.trim()));
            }
        }
    }
    assert!(found.is_empty(), "the policy core is not pure:\n{}", found.join("\n"));
}
