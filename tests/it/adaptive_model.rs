//! Integration tests: the properties the `adaptive` policy's model promises
//! (its module doc), each checked over several seeds of grids built here —
//! not the named scenarios. Runs are simulated in virtual time and
//! deterministic by seed; a failure names its seed.

use cosched::policy::{Action, Decision, Input, JobBook, Policy, PolicyConfig, SiteId, SiteView, Time};
use cosched::sim::backend::AttemptEnd;
use cosched::sim::{self, Capacity, Scenario, SimOptions, SimResult, SiteParams};

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

fn run(scenario: &Scenario, policy: &str, seed: u64) -> SimResult {
    let config = PolicyConfig::named(policy).expect("known policy");
    let result = sim::run(scenario, &config, seed, &SimOptions::default());
    assert!(result.errors.is_empty(), "{policy} seed {seed}: conservation: {:?}", result.errors);
    assert!(!result.hang, "{policy} seed {seed}: the run hangs");
    assert_eq!(result.metrics.jobs_done, scenario.n_jobs, "{policy} seed {seed}: jobs done");
    result
}

fn makespan(r: &SimResult) -> f64 {
    r.metrics.makespan.expect("a settled run has a makespan")
}

/// Executions that had started and were removed: slot-time thrown away.
fn cut_short(r: &SimResult) -> usize {
    r.attempts.iter().filter(|a| a.started.is_some() && a.end == AttemptEnd::Removed).count()
}

#[test]
fn run_time_jitter_of_fifty_percent_on_a_healthy_site_is_never_read_as_degradation() {
    // No knee, 300 slots, jobs of 200 s ± 50%: nothing ever degrades, so any
    // Degraded verdict is a false alarm. Ten seeds × four waves of jobs.
    let scenario = Scenario {
        desc: "healthy, ±50% run times".into(),
        n_jobs: 1200,
        base_runtime: 200.0,
        jitter: 0.5,
        sites: vec![site("healthy", 300)],
    };
    for seed in 1..=10 {
        let r = run(&scenario, "adaptive", seed);
        let learned = &r.learned["healthy"];
        assert_eq!(learned.ceiling, None, "seed {seed}: a degraded verdict on a healthy site: {learned:?}");
        let found = learned.capacity.unwrap_or(0.0);
        assert!(found >= 0.9 * 300.0, "seed {seed}: the window stopped at {found:.0} of 300 healthy slots");
        assert_eq!(cut_short(&r), 0, "seed {seed}: running jobs removed on a healthy site");
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
            n_jobs: 1500,
            base_runtime: 300.0,
            jitter,
            sites: vec![SiteParams { capacity: Capacity::Finite(40.0), beta: 1.0, ..site("knee", 500) }],
        };
        let r = run(&scenario, "adaptive", seed);
        let found = r.learned["knee"].capacity.expect("a capacity was found");
        assert!(
            (24.0..=60.0).contains(&found),
            "seed {seed}, jitter ±{jitter}: capacity found {found:.0}, true knee 40"
        );
        let oracle = makespan(&run(&scenario, "oracle", seed));
        assert!(
            makespan(&r) <= 1.5 * oracle,
            "seed {seed}, jitter ±{jitter}: adaptive {:.0} s vs oracle {oracle:.0} s",
            makespan(&r)
        );
        assert_eq!(cut_short(&r), 0, "seed {seed}: a smaller window sheds load by sending less");
    }
}

#[test]
fn a_collapse_is_seen_before_the_collapsed_jobs_end() {
    // A knee of 11 with steep thrash (beta 2) below the first window of 16:
    // the first cohort runs slowed, and the first probe runs every job
    // fifteen times slower or more, past any healthy run seen. The test must
    // still reach its verdict while those jobs run (they testify once past
    // twice the longest healthy run), not when they end. Waits of 120 s keep
    // jobs queued ahead, so the verdict shows as their withdrawal.
    let steep = SiteParams {
        capacity: Capacity::Finite(11.0),
        beta: 2.0,
        wait_mean: 120.0,
        ..SiteParams::healthy("steep", 60)
    };
    let scenario = Scenario {
        desc: "steep knee below the first window".into(),
        n_jobs: 400,
        base_runtime: 60.0,
        jitter: 0.2,
        sites: vec![steep],
    };
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

#[test]
fn a_dead_site_is_abandoned_within_the_idle_timeout() {
    // Beside a healthy site, one that never starts anything: the run must
    // finish no later than it would without the dead site plus the default
    // idle timeout (1200 s), and the dead site is remembered unresponsive.
    let healthy = SiteParams { wait_mean: 30.0, ..site("alive", 100) };
    let alone = Scenario {
        desc: "alone".into(),
        n_jobs: 600,
        base_runtime: 120.0,
        jitter: 0.3,
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
        assert!(r.learned["dead"].unresponsive, "seed {seed}: {:?}", r.learned["dead"]);
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
            }
        })
        .collect();
    if sites.iter().all(|s| s.dead) {
        sites[0].dead = false;
    }
    Scenario {
        desc: format!("random grid {seed}"),
        n_jobs: u64::from(rng.u32(50, 1500)),
        base_runtime: rng.pick(&[30.0, 120.0, 600.0]),
        jitter: 0.5 * rng.f64(),
        sites,
    }
}

#[test]
fn every_job_of_a_random_grid_is_done_once_by_every_adaptive_policy() {
    // Conservation (no job lost, none done twice, no attempt at two sites at
    // once: the engine checks each input) and termination on 40 random grids.
    for seed in 1..=40 {
        let grid = random_grid(seed);
        for policy in ["adaptive", "oracle", "thesis"] {
            let r = run(&grid, policy, seed);
            let mut done = vec![0u32; grid.n_jobs as usize];
            for a in r.attempts.iter().filter(|a| a.end == AttemptEnd::Success) {
                done[a.job as usize] += 1;
            }
            let twice = done.iter().filter(|&&d| d > 1).count();
            assert_eq!(twice, 0, "{policy}, grid seed {seed}: {twice} jobs completed twice");
        }
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
    let made = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for seed in 1..=12 {
        let grid = random_grid(seed);
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
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .expect("a runtime");
            let result =
                runtime.block_on(sim::run_policy(&grid, Box::new(twin), seed, &SimOptions::default()));
            assert!(!result.hang, "grid seed {seed}: the run hangs");
            assert_eq!(result.metrics.jobs_done, grid.n_jobs, "grid seed {seed}");
        }
    }
    let made = made.load(std::sync::atomic::Ordering::Relaxed);
    assert!(made >= 30, "only {made} of 36 runs got as far as their twin");
}
