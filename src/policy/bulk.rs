//! `bulk`: what plain Condor-G bulk submission does. Every job goes out at
//! t = 0, split across sites in proportion to their slots; a failed attempt is
//! resubmitted to the same site (a job that site held for a cause of its own,
//! to the next site that has not). No judgement at all, which is why it is a
//! baseline: it shows what throttling is worth.

use super::book::Change;
use super::{Action, Input, JobBook, JobId, Policy, RunSpec, SiteId, SiteView, Time};

pub struct Bulk {
    book: JobBook,
    /// How many jobs each site is given at the start (proportional to slots).
    shares: Vec<u64>,
}

impl Bulk {
    pub fn new(spec: &RunSpec) -> Self {
        Bulk {
            book: JobBook::new(spec.n_jobs, spec.sites.len(), spec.max_attempts),
            shares: proportional_shares(
                spec.n_jobs,
                &spec.sites.iter().map(|s| f64::from(s.slots.unwrap_or(1).max(1))).collect::<Vec<_>>(),
            ),
        }
    }
}

/// Splits `n` into parts proportional to `weights` (largest remainder, ties to
/// the lower index), so the parts always add up to `n`.
///
/// ```
/// use cosched::policy::bulk::proportional_shares;
/// // 1,000 jobs over sites with 200, 150 and 300 slots:
/// let parts = proportional_shares(1000, &[200.0, 150.0, 300.0]);
/// assert_eq!(parts, vec![308, 231, 461]);
/// assert_eq!(parts.iter().sum::<u64>(), 1000);
/// ```
pub fn proportional_shares(n: u64, weights: &[f64]) -> Vec<u64> {
    let total: f64 = weights.iter().sum();
    if weights.is_empty() || total <= 0.0 {
        return vec![0; weights.len()];
    }
    let exact: Vec<f64> = weights.iter().map(|w| n as f64 * w / total).collect();
    let mut parts: Vec<u64> = exact.iter().map(|x| x.floor() as u64).collect();
    let mut left = n - parts.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        rb.partial_cmp(&ra).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
    });
    for i in order {
        if left == 0 {
            break;
        }
        parts[i] += 1;
        left -= 1;
    }
    parts
}

impl Bulk {
    /// Jobs `site` held for a cause of its own go to the next site after it
    /// (in site order, round) that has not held them; those every site has
    /// held are given up.
    fn resubmit_barred(&mut self, site: SiteId, actions: &mut Vec<Action>) {
        let n = self.shares.len();
        actions.extend(self.book.give_up_stranded(&vec![true; n]));
        let mut sent: Vec<Vec<JobId>> = vec![Vec::new(); n];
        for job in self.book.barred_in_pool().collect::<Vec<_>>() {
            let mut next = (1..=n).map(|k| SiteId(((site.index() + k) % n) as u32));
            if let Some(to) = next.find(|&to| !self.book.barred_at(job, to)) {
                sent[to.index()].extend(self.book.take_these(to, &[job]));
            }
        }
        for (i, jobs) in sent.into_iter().enumerate().filter(|(_, jobs)| !jobs.is_empty()) {
            let why = "held at another site for a cause of that site".into();
            actions.push(Action::Submit { site: SiteId(i as u32), jobs, why });
        }
    }
}

impl Policy for Bulk {
    fn name(&self) -> &'static str {
        "bulk"
    }

    fn handle(&mut self, _now: Time, input: &Input) -> Vec<Action> {
        let mut actions = Vec::new();
        match input {
            Input::Start => {
                for (i, &share) in self.shares.iter().enumerate() {
                    let site = SiteId(i as u32);
                    let jobs = self.book.take(site, share);
                    if !jobs.is_empty() {
                        actions.push(Action::Submit { site, jobs, why: "bulk: everything at once".into() });
                    }
                }
            }
            Input::Site { site, event } => {
                let change = self.book.apply(*site, event);
                actions.extend(self.book.after_failure(*site, &change));
                let back_in_pool = matches!(
                    change,
                    Change::Returned { .. } | Change::Removed { .. } | Change::Failed { held: false, .. }
                );
                let jobs =
                    if back_in_pool { self.book.take(*site, self.book.pool_len()) } else { Vec::new() };
                if !jobs.is_empty() {
                    actions.push(Action::Submit {
                        site: *site,
                        jobs,
                        why: "resubmit to the same site".into(),
                    });
                }
                if self.book.any_barred() {
                    self.resubmit_barred(*site, &mut actions);
                }
            }
            Input::Tick => {}
        }
        actions
    }

    fn next_deadline(&self) -> Option<Time> {
        None
    }

    fn book(&self) -> &JobBook {
        &self.book
    }

    fn site_view(&self, site: SiteId) -> SiteView {
        SiteView { window: self.shares[site.index()] as u32, ..SiteView::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_follow_weights() {
        assert_eq!(proportional_shares(10, &[1.0, 1.0, 1.0]), vec![4, 3, 3]);
        assert_eq!(proportional_shares(375, &[400.0]), vec![375]);
        let parts = proportional_shares(1000, &[200.0, 150.0, 300.0]);
        assert_eq!(parts.iter().sum::<u64>(), 1000);
        assert_eq!(parts, vec![308, 231, 461]);
    }
}
