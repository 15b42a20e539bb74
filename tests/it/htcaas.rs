//! `htcaas` (issue 55): seed 003's dispatch ratios per kind of job, on
//! cases worked by hand through the policy's own interface, and on
//! simulated grids.

use cosched::policy::htcaas::{Htcaas, STEP};
use cosched::policy::{
    Action, Input, JobId, JobTypeId, JobTypes, Outcome, Policy, PolicyConfig, RunSpec, SiteEvent, SiteId,
    SiteInfo, SiteTruth, Truth, TypeTruth,
};
use cosched::sim::{self, SimOptions};

fn site(slots: u32, capacity: f64) -> SiteTruth {
    SiteTruth {
        slots,
        wait_mean: 0.0,
        capacity,
        beta: 0.0,
        speed: 1.0,
        p_fail: 0.0,
        cap_windows: Vec::new(),
        dead: false,
        type_speed: Vec::new(),
    }
}

/// A cluster of 10 slots whose server holds 10 I/O jobs, a cloud of 10 slots
/// whose server holds 2; 40 I/O jobs (load 1) and 40 CPU jobs (load 0.05),
/// all of 100 s, interleaved.
fn cluster_and_cloud() -> (RunSpec, Truth) {
    let kinds: Vec<JobTypeId> = (0..80).map(|j| JobTypeId(j % 2)).collect();
    let types = JobTypes::new(vec!["io".into(), "cpu".into()], kinds).expect("two kinds");
    let spec = RunSpec {
        n_jobs: 80,
        types,
        sites: vec![
            SiteInfo { slots: Some(10), ..SiteInfo::named("cluster") },
            SiteInfo { slots: Some(10), ..SiteInfo::named("cloud") },
        ],
        max_attempts: 3,
        ..RunSpec::default()
    };
    let truth = Truth {
        sites: vec![site(10, 10.0), site(10, 2.0)],
        base_runtime: 100.0,
        types: vec![
            TypeTruth { base_runtime: 100.0, load: 1.0 },
            TypeTruth { base_runtime: 100.0, load: 0.05 },
        ],
    };
    (spec, truth)
}

fn submitted(actions: &[Action]) -> Vec<(SiteId, Vec<JobId>)> {
    let mut out = Vec::new();
    for action in actions {
        if let Action::Submit { site, jobs, .. } = action {
            out.push((*site, jobs.clone()));
        }
    }
    out
}

fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
}

#[test]
fn issue_55_htcaas_measures_each_kinds_ratio_and_moves_it_off_the_site_whose_queue_passes_the_threshold() {
    let (spec, truth) = cluster_and_cloud();
    let (io, cpu) = (JobTypeId(0), JobTypeId(1));
    let mut p = Htcaas::new(&spec, &truth);
    // The measurement, by hand, a tenth (4 jobs) at a time to the site
    // where it ends soonest (ties to the cluster). I/O at the cluster: 4 q
    // jobs, 10 at a time at full speed, ⌈4q/10⌉ × 100 s. At the cloud 4 q
    // jobs load its server of 2 with min(4q, 10): each runs at 2/L, so one
    // tenth takes 200 s, two 400 s. The cluster takes tenths until its
    // ninth (400 s) ties the cloud's second (400 s); the cloud has one:
    // 0.9 / 0.1. CPU jobs load neither server past its capacity, so both
    // sites are alike and the tenths alternate in pairs: 0.5 / 0.5.
    assert!(close(p.ratio(io), &[0.9, 0.1]), "measured I/O ratio {:?}", p.ratio(io));
    assert!(close(p.ratio(cpu), &[0.5, 0.5]), "measured CPU ratio {:?}", p.ratio(cpu));
    // Algorithm 1: 36 I/O and 20 CPU jobs to the cluster, 4 and 20 to the cloud.
    let sent = submitted(&p.handle(0.0, &Input::Start));
    let count = |s: u32, t: JobTypeId| {
        sent.iter()
            .filter(|(site, _)| *site == SiteId(s))
            .flat_map(|(_, j)| j)
            .filter(|j| spec.types.of(**j) == t)
            .count()
    };
    assert_eq!((count(0, io), count(0, cpu), count(1, io), count(1, cpu)), (36, 20, 4, 20));
    // Algorithm 2: λ is the mean metajob, 40 tasks. The cluster's queue
    // holds 56, the cloud's 24: both kinds' cluster shares fall by k.
    assert!(close(p.ratio(io), &[0.9 - STEP, 0.1 + STEP]), "I/O ratio {:?}", p.ratio(io));
    assert!(close(p.ratio(cpu), &[0.5 - STEP, 0.5 + STEP]), "CPU ratio {:?}", p.ratio(cpu));
    for (site, jobs) in &sent {
        p.handle(
            1.0,
            &Input::Site { site: *site, event: SiteEvent::Submitted { jobs: jobs.clone(), at: 1.0 } },
        );
    }
    // The cluster starts 10: 46 still wait there, past λ; the cloud's 24
    // do not. A failed I/O attempt at the cluster comes in again and goes
    // to the site furthest below the ratio, 0.8 × 41 − 36 = −3.2 at the
    // cluster against 0.2 × 41 − 4 = 4.2 at the cloud; the shares fall again.
    let at_cluster = &sent.iter().find(|(s, _)| *s == SiteId(0)).expect("cluster jobs").1;
    for &job in &at_cluster[..10] {
        p.handle(2.0, &Input::Site { site: SiteId(0), event: SiteEvent::Started { job, at: 2.0 } });
    }
    let failed = *at_cluster[..10].iter().find(|j| spec.types.of(**j) == io).expect("an I/O job runs");
    let outcome = Outcome::Failed { detail: "exit 1".into() };
    let ended = SiteEvent::Ended { job: failed, at: 50.0, outcome };
    let again = submitted(&p.handle(50.0, &Input::Site { site: SiteId(0), event: ended }));
    assert_eq!(again, vec![(SiteId(1), vec![failed])], "the failed task goes to the cloud");
    assert!(close(p.ratio(io), &[0.9 - 2.0 * STEP, 0.1 + 2.0 * STEP]), "I/O ratio {:?}", p.ratio(io));
}

#[test]
fn issue_55_htcaas_runs_typed_and_untyped_grids_without_losing_a_job_or_hanging_on_a_dead_site() {
    // A typed grid with a dead site, and the same grid blind to kinds.
    let text = "[scenarios.H]\ntypes = [\n  { name = \"io\", n_jobs = 300, base_runtime = 200, jitter = 0.2, load = 1.0 },\n  \
                { name = \"cpu\", n_jobs = 300, base_runtime = 300, jitter = 0.2, load = 0.03 },\n]\nsites = [\n  \
                { name = \"a\", slots = 60, capacity = 30, beta = 0.5, wait_mean = 30, p_fail = 0.05 },\n  \
                { name = \"b\", slots = 100, capacity = 8, beta = 0.5, wait_mean = 10, type_speed = { cpu = 0.8 } },\n  \
                { name = \"x\", slots = 50, capacity = 50, dead = true },\n]\n";
    let sc = sim::parse_scenarios(text).expect("scenario parses").remove(0).1;
    let htcaas = PolicyConfig::named("htcaas").expect("htcaas is registered");
    for seed in 1..=3 {
        for blind_types in [false, true] {
            let r = sim::run(&sc, &htcaas, seed, &SimOptions { blind_types, ..SimOptions::default() });
            let case = format!("seed {seed}{}", if blind_types { " blind" } else { "" });
            assert!(r.errors.is_empty(), "{case}: {:?}", r.errors);
            assert!(!r.hang, "{case}: hangs");
            assert_eq!(r.metrics.jobs_done, 600, "{case}");
            assert_eq!(r.metrics.sites[2].jobs_done, 0, "{case}: the dead site ran something");
        }
    }
}
