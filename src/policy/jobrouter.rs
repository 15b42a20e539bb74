//! `jobrouter`: what the HTCondor JobRouter does with its per-route limits.
//! Per site, keep submitting while our idle jobs there are fewer than
//! `MaxIdleJobs` and our jobs there (idle + running) fewer than `MaxJobs`;
//! sites are filled in their configured order. It throttles, but by fixed
//! numbers that know nothing of the site's capacity — the baseline that shows
//! what measuring is worth.

use super::{Action, Input, JobBook, Policy, RunSpec, SiteId, SiteView, Time};
use serde::{Deserialize, Serialize};

fn default_max_idle() -> u32 {
    10
}
fn default_max_jobs() -> u32 {
    200
}

/// Parameters from the `[policy]` table of sites.toml.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// JobRouter `MaxIdleJobs`: stop routing to a site with this many idle jobs.
    #[serde(default = "default_max_idle")]
    pub max_idle: u32,
    /// JobRouter `MaxJobs`: stop routing to a site with this many jobs out.
    #[serde(default = "default_max_jobs")]
    pub max_jobs: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params { max_idle: default_max_idle(), max_jobs: default_max_jobs() }
    }
}

pub struct JobRouter {
    book: JobBook,
    /// Per site: (max idle, max jobs), a site's own limits over the defaults.
    limits: Vec<(u32, u32)>,
}

impl JobRouter {
    pub fn new(spec: &RunSpec, params: &Params) -> Self {
        JobRouter {
            book: JobBook::new(spec.n_jobs, spec.sites.len(), spec.max_attempts),
            limits: spec
                .sites
                .iter()
                .map(|s| (s.max_idle.unwrap_or(params.max_idle), s.max_jobs.unwrap_or(params.max_jobs)))
                .collect(),
        }
    }

    /// Tops every site up to its limits, in site order.
    fn route(&mut self, actions: &mut Vec<Action>) {
        for (i, &(max_idle, max_jobs)) in self.limits.iter().enumerate() {
            if self.book.pool_len() == 0 {
                break;
            }
            let site = SiteId(i as u32);
            let c = self.book.counts(site);
            let idle = c.submitting + c.idle;
            let room = max_idle.saturating_sub(idle).min(max_jobs.saturating_sub(c.out()));
            let jobs = self.book.take(site, u64::from(room));
            if !jobs.is_empty() {
                let why =
                    format!("idle {idle} < MaxIdleJobs {max_idle}, out {} < MaxJobs {max_jobs}", c.out());
                actions.push(Action::Submit { site, jobs, why });
            }
        }
    }
}

impl Policy for JobRouter {
    fn name(&self) -> &'static str {
        "jobrouter"
    }

    fn handle(&mut self, _now: Time, input: &Input) -> Vec<Action> {
        let mut actions = Vec::new();
        if let Input::Site { site, event } = input {
            let change = self.book.apply(*site, event);
            actions.extend(self.book.after_failure(*site, &change));
        }
        self.route(&mut actions);
        actions
    }

    fn next_deadline(&self) -> Option<Time> {
        None
    }

    fn book(&self) -> &JobBook {
        &self.book
    }

    fn site_view(&self, site: SiteId) -> SiteView {
        SiteView { window: self.limits[site.index()].1, ..SiteView::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{JobId, SiteEvent, SiteInfo};

    fn spec(n: u64, sites: usize) -> RunSpec {
        RunSpec {
            n_jobs: n,
            sites: (0..sites).map(|i| SiteInfo::named(format!("s{i}"))).collect(),
            max_attempts: 3,
            ..RunSpec::default()
        }
    }

    fn submitted(actions: &[Action]) -> Vec<(u32, usize)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Submit { site, jobs, .. } => Some((site.0, jobs.len())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn fills_each_site_to_max_idle_then_one_per_start() {
        let mut p = JobRouter::new(&spec(100, 2), &Params::default());
        assert_eq!(submitted(&p.handle(0.0, &Input::Start)), vec![(0, 10), (1, 10)]);
        let ev = SiteEvent::Submitted { jobs: (0..10).map(JobId).collect(), at: 0.0 };
        assert!(submitted(&p.handle(0.0, &Input::Site { site: SiteId(0), event: ev })).is_empty());
        let ev = SiteEvent::Started { job: JobId(3), at: 1.0 };
        assert_eq!(submitted(&p.handle(1.0, &Input::Site { site: SiteId(0), event: ev })), vec![(0, 1)]);
    }

    #[test]
    fn never_exceeds_max_jobs() {
        let params = Params { max_idle: 10, max_jobs: 12 };
        let mut p = JobRouter::new(&spec(100, 1), &params);
        p.handle(0.0, &Input::Start);
        let ev = SiteEvent::Submitted { jobs: (0..10).map(JobId).collect(), at: 0.0 };
        p.handle(0.0, &Input::Site { site: SiteId(0), event: ev });
        for j in 0..5 {
            let ev = SiteEvent::Started { job: JobId(j), at: 1.0 };
            p.handle(1.0, &Input::Site { site: SiteId(0), event: ev });
        }
        assert_eq!(p.book().counts(SiteId(0)).out(), 12);
    }

    #[test]
    fn params_default_to_the_jobrouter_defaults() {
        let p: Params = toml::from_str("").unwrap();
        assert_eq!(p, Params { max_idle: 10, max_jobs: 200 });
        let p: Params = toml::from_str("max_jobs = 50").unwrap();
        assert_eq!(p, Params { max_idle: 10, max_jobs: 50 });
    }
}
