use super::*;
use crate::policy::{Outcome, SiteInfo};

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
    let sent = |s: u32| -> usize {
        acts.iter()
            .map(|a| match a {
                Action::Submit { site, jobs, .. } if *site == SiteId(s) => jobs.len(),
                _ => 0,
            })
            .sum()
    };
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
