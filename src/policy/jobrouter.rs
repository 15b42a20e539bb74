//! `jobrouter`: what the HTCondor JobRouter does with its per-route limits.
//! Per site, keep submitting while our idle jobs there are fewer than
//! `MaxIdleJobs` and our jobs there (idle + running) fewer than `MaxJobs`;
//! sites are filled in their configured order. It throttles, but by fixed
//! numbers that know nothing of the site's capacity — the baseline that shows
//! what measuring is worth.
//!
//! Cost per input: O(log sites) plus the jobs handed out. Only the sites
//! with room are visited (`wanting`); a site's room changes only when its own
//! counts do, so an event re-files just the sites it touched.

use super::{Action, Input, JobBook, Policy, RunSpec, SiteEvent, SiteId, SiteView, Time};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

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

impl super::ParamRanges for Params {
    fn out_of_range(&self) -> Vec<super::OutOfRange> {
        // At 0 nothing is ever routed, and the run waits for ever.
        super::failing(&[
            ("max_idle", self.max_idle >= 1, "a number of jobs, at least 1"),
            ("max_jobs", self.max_jobs >= 1, "a number of jobs, at least 1"),
        ])
    }
}

pub struct JobRouter {
    book: JobBook,
    /// Per site: (max idle, max jobs), a site's own limits over the defaults.
    limits: Vec<(u32, u32)>,
    /// The sites below both limits, in site order.
    wanting: BTreeSet<u32>,
}

impl JobRouter {
    pub fn new(spec: &RunSpec, params: &Params) -> Self {
        let mut router = JobRouter {
            book: JobBook::new(spec.n_jobs, spec.sites.len(), spec.max_attempts),
            limits: spec
                .sites
                .iter()
                .map(|s| (s.max_idle.unwrap_or(params.max_idle), s.max_jobs.unwrap_or(params.max_jobs)))
                .collect(),
            wanting: BTreeSet::new(),
        };
        for i in 0..router.limits.len() {
            router.refile(SiteId(i as u32));
        }
        router
    }

    /// Jobs `site` may still be given: (room, idle, out).
    fn room(&self, site: SiteId) -> (u32, u32, u32) {
        let (max_idle, max_jobs) = self.limits[site.index()];
        let c = self.book.counts(site);
        let idle = c.submitting + c.idle;
        (max_idle.saturating_sub(idle).min(max_jobs.saturating_sub(c.out())), idle, c.out())
    }

    /// Keeps `wanting` true for `site` after its counts changed.
    fn refile(&mut self, site: SiteId) {
        if self.room(site).0 > 0 {
            self.wanting.insert(site.0);
        } else {
            self.wanting.remove(&site.0);
        }
    }

    /// Tops every site up to its limits, in site order.
    fn route(&mut self, actions: &mut Vec<Action>) {
        let mut from = 0;
        while self.book.pool_len() > 0 {
            let Some(&i) = self.wanting.range(from..).next() else { break };
            from = i + 1;
            let site = SiteId(i);
            let (max_idle, max_jobs) = self.limits[site.index()];
            let (room, idle, out) = self.room(site);
            let jobs = self.book.take(site, u64::from(room));
            self.refile(site);
            if !jobs.is_empty() {
                let why = format!("idle {idle} < MaxIdleJobs {max_idle}, out {out} < MaxJobs {max_jobs}");
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
            // Only a resumed run's history confirms a job at another site
            // than the one it was handed to; that site's counts change too.
            let mut elsewhere = Vec::new();
            if let SiteEvent::Submitted { jobs, .. } = event {
                elsewhere
                    .extend(jobs.iter().filter_map(|&j| self.book.state(j).site()).filter(|s| s != site));
                elsewhere.dedup();
            }
            let change = self.book.apply(*site, event);
            actions.extend(self.book.after_failure(*site, &change));
            for s in elsewhere.into_iter().chain([*site]) {
                self.refile(s);
            }
            // Every site is live to a static router: a job is stranded
            // only once each has held it for a cause of its own.
            if self.book.any_barred() {
                actions.extend(self.book.give_up_stranded(&vec![true; self.limits.len()]));
            }
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
