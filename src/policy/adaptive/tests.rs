use super::*;
use crate::policy::{JobTypeId, JobTypes, Outcome, SiteInfo, SiteMemory};

fn spec(n: u64, slots: &[u32]) -> RunSpec {
    RunSpec {
        n_jobs: n,
        types: crate::policy::JobTypes::single(n),
        sites: slots
            .iter()
            .enumerate()
            .map(|(i, &s)| SiteInfo { slots: Some(s), ..SiteInfo::named(format!("s{i}")) })
            .collect(),
        kind_keys: Vec::new(),
        memory: CapacityMemory::new(),
        max_attempts: 3,
    }
}

/// Jobs `acts` submit to `site`.
fn submitted_to(acts: &[Action], site: SiteId) -> usize {
    acts.iter()
        .map(|a| match a {
            Action::Submit { site: s, jobs, .. } if *s == site => jobs.len(),
            _ => 0,
        })
        .sum()
}

#[test]
fn params_reject_unknown_keys_and_default_missing_ones() {
    let p: Params = toml::from_str("initial_window = 8").unwrap();
    assert_eq!(p, Params { initial_window: 8, ..Params::default() });
    assert!(toml::from_str::<Params>("window = 8").is_err());
}

#[test]
fn a_start_sends_the_initial_window_to_every_site() {
    let mut p = Adaptive::new(&spec(1000, &[400, 5]), &Params::default());
    let acts = p.handle(0.0, &Input::Start);
    let sent = |s: u32| submitted_to(&acts, SiteId(s));
    assert_eq!(sent(0), 16);
    assert_eq!(sent(1), 5, "capped by the slots");
    let _ = Outcome::Success;
}

#[test]
fn the_users_limits_reach_the_planner() {
    let mut s = spec(1000, &[400, 400]);
    s.sites[0].max_idle = Some(3);
    s.sites[1].max_jobs = Some(50);
    let p = Adaptive::new(&s, &Params::default());
    assert_eq!((p.model(0, 0.0).max_out, p.model(0, 0.0).max_idle), (None, Some(3.0)));
    assert_eq!((p.model(1, 0.0).max_out, p.model(1, 0.0).max_idle), (Some(50.0), None));
}

#[test]
fn a_restored_run_takes_the_limits_of_the_sites_file_it_resumes_with() {
    let mut before = spec(1000, &[400, 400]);
    before.sites[0].max_idle = Some(30);
    let mut p = Adaptive::new(&before, &Params::default());
    p.handle(0.0, &Input::Start);
    let saved = p.checkpoint().expect("adaptive checkpoints");
    let mut after = spec(1000, &[400, 400]);
    after.sites[0].max_idle = Some(3);
    let mut resumed = Adaptive::new(&after, &Params::default());
    resumed.restore(&saved).expect("the same run restores");
    assert_eq!(resumed.model(0, 0.0).max_idle, Some(3.0));
}

#[test]
fn a_checkpoint_with_decisions_not_yet_taken_restores() {
    let s = spec(1000, &[400, 400]);
    let mut p = Adaptive::new(&s, &Params::default());
    p.handle(0.0, &Input::Start);
    assert!(!p.decided.is_empty(), "the start decides each site's first window");
    let saved = p.checkpoint().expect("adaptive checkpoints");
    let mut resumed = Adaptive::new(&s, &Params::default());
    resumed.restore(&saved).expect("the same run restores");
    assert_eq!(resumed.take_decisions(), p.take_decisions());
}

#[test]
fn at_the_start_each_kind_plans_with_its_share_of_the_slots_and_withdraws_nothing() {
    // One site of 64 slots, two kinds each remembered healthy at 48 with no
    // knee above: each would take every slot, so each has half of them.
    // Planned one lane after the other with the first unaware of the
    // second, the first sent 64 and withdrew 32 at once.
    let quantiles: Vec<f64> = (0..=16).map(|i| 90.0 + 20.0 * f64::from(i) / 16.0).collect();
    let learned = SiteMemory {
        capacity: Some(48.0),
        runtime_quantiles: Some(quantiles),
        runtime_range: Some((90.0, 110.0)),
        ..SiteMemory::default()
    };
    let mut memory = CapacityMemory::new();
    memory.insert("s0", "io", learned.clone());
    memory.insert("s0", "cpu", learned);
    let types = JobTypes::interleaved(vec!["io".into(), "cpu".into()], &[500, 500]).unwrap();
    let run = RunSpec { types: types.clone(), memory, ..spec(1000, &[64]) };
    let mut p = build(&run, &Params::default());
    let acts = p.handle(0.0, &Input::Start);
    assert!(!acts.iter().any(|a| matches!(a, Action::Withdraw { .. })), "{acts:?}");
    let sent = |kind: u16| -> usize {
        acts.iter()
            .map(|a| match a {
                Action::Submit { jobs, .. } => {
                    jobs.iter().filter(|&&j| types.of(j) == JobTypeId(kind)).count()
                }
                _ => 0,
            })
            .sum()
    };
    assert_eq!((sent(0), sent(1)), (32, 32));
}

#[test]
fn an_operators_first_window_is_shared_by_the_kinds() {
    // Equal parts, a kind of few jobs leaving the rest, one job at least.
    assert_eq!(kinds::shares_of(10, &[500, 500, 500]), [3, 3, 4]);
    assert_eq!(kinds::shares_of(10, &[2, 500]), [2, 8]);
    assert_eq!(kinds::shares_of(2, &[5, 5, 5]), [1, 1, 1]);
    assert_eq!(kinds::shares_of(16, &[40]), [16]);
    // A site whose operator says 10 jobs of any kind are below its knee
    // starts with 10, not 10 of each of three kinds (a tester's run: 30 on
    // a knee of 20, every job twice as slow).
    let types = JobTypes::interleaved(vec!["a".into(), "b".into(), "c".into()], &[100, 100, 100]).unwrap();
    let mut run = RunSpec { types, ..spec(300, &[60, 60]) };
    run.sites[0].initial_window = Some(10);
    let mut p = build(&run, &Params::default());
    let acts = p.handle(0.0, &Input::Start);
    let sent = |s: u32| submitted_to(&acts, SiteId(s));
    assert_eq!(sent(0), 10, "the operator's window, all kinds together");
    assert_eq!(sent(1), 48, "the policy's first window is each kind's");
}
