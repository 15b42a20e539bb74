//! Memory that follows the job: what earlier runs learned, per site and per
//! kind of job, for a policy to start from (warm start).
//!
//! A kind is known across runs by its *memory key* ([`super::RunSpec::kind_key`]):
//! in a real run the fingerprint of its submit description, or the name the
//! user gave it (`submit_desc::kind_key`); in the simulator the scenario's
//! type name. The knee and the run times are the kind's own: an I/O-heavy
//! job's knee says nothing of a CPU-bound job's at the same site. What is the
//! *site's* carries over to a kind new there ([`CapacityMemory::carried_over`]):
//! its queue wait (other users' load), how it starts the jobs waiting there
//! (one by one as room frees, or together at a matchmaker's cycle), whether
//! it started anything at all, and its attempts' failure rate (broken nodes,
//! a bad gatekeeper).
//!
//! Memory whose kind is not known ([`UNKNOWN_KIND`]: what cosched learned
//! before it told kinds apart) is only ever carried over.
//!
//! Pure: where memory is stored is `state::memory`'s business.

use super::SiteMemory;
use std::collections::BTreeMap;

/// The key of memory learned before kinds were told apart (a state
/// database of schema 2 or older): no kind of a run has it, so it is only
/// carried over.
pub const UNKNOWN_KIND: &str = "";

/// What runs learned, by site name and kind key. Names survive edits of the
/// site list (indexes do not), and kind keys survive moving the job to
/// another directory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CapacityMemory {
    /// Each (site, kind)'s memory.
    entries: BTreeMap<(String, String), SiteMemory>,
    /// Per site, the kind learned there last: what carries over to a new
    /// kind is the site's latest state, not an older kind's.
    latest: BTreeMap<String, String>,
}

impl CapacityMemory {
    pub fn new() -> Self {
        CapacityMemory::default()
    }

    /// Adds (or replaces) what was learned of `kind` at `site`. Memory
    /// inserted later counts as learned later ([`Self::carried_over`]).
    pub fn insert(&mut self, site: impl Into<String>, kind: impl Into<String>, memory: SiteMemory) {
        let (site, kind) = (site.into(), kind.into());
        self.latest.insert(site.clone(), kind.clone());
        self.entries.insert((site, kind), memory);
    }

    /// What was learned of `kind` at `site`.
    pub fn get(&self, site: &str, kind: &str) -> Option<&SiteMemory> {
        self.entries.get(&(site.to_string(), kind.to_string()))
    }

    /// What a kind with no memory of its own at `site` starts from: the
    /// site's queue wait and how it starts jobs, whether it started nothing, and its attempts'
    /// outcomes, as the kind learned there last left them (knee and run
    /// times stay the kind's). `None` where no kind was learned there.
    pub fn carried_over(&self, site: &str) -> Option<SiteMemory> {
        let kind = self.latest.get(site)?;
        self.get(site, kind).map(SiteMemory::carried_over)
    }

    /// Every kind learned at `site`, by kind key.
    pub fn of_site<'a>(&'a self, site: &'a str) -> impl Iterator<Item = (&'a str, &'a SiteMemory)> + 'a {
        self.entries.iter().filter(move |((s, _), _)| s == site).map(|((_, k), m)| (k.as_str(), m))
    }

    /// Every (site, kind, memory), by site then kind.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &SiteMemory)> {
        self.entries.iter().map(|((s, k), m)| (s.as_str(), k.as_str(), m))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl SiteMemory {
    /// What of this memory is the site's, not its kind's (see the module
    /// doc): everything else is left unknown.
    pub fn carried_over(&self) -> SiteMemory {
        SiteMemory {
            mean_wait: self.mean_wait,
            starts_one_by_one: self.starts_one_by_one,
            attempts: self.attempts,
            unresponsive: self.unresponsive,
            ..SiteMemory::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learned(capacity: f64, wait: f64) -> SiteMemory {
        SiteMemory {
            capacity: Some(capacity),
            baseline_runtime: Some(100.0),
            runtime_quantiles: Some(vec![50.0, 100.0, 150.0]),
            ceiling: Some(2.0 * capacity),
            mean_wait: Some(wait),
            starts_one_by_one: Some(true),
            attempts: Some((30, 2)),
            ..SiteMemory::default()
        }
    }

    #[test]
    fn each_kind_has_its_own_memory_at_a_site() {
        let mut m = CapacityMemory::new();
        m.insert("a", "io", learned(4.0, 10.0));
        m.insert("a", "cpu", learned(40.0, 12.0));
        m.insert("b", "io", learned(8.0, 30.0));
        assert_eq!(m.get("a", "io").and_then(|x| x.capacity), Some(4.0));
        assert_eq!(m.get("a", "cpu").and_then(|x| x.capacity), Some(40.0));
        assert_eq!(m.get("b", "cpu"), None);
        assert_eq!(m.of_site("a").map(|(k, _)| k).collect::<Vec<_>>(), ["cpu", "io"]);
        assert_eq!(m.len(), 3);
    }

    /// The default policy, of one kind keyed `kind`, at sites "a" and "b"
    /// of 64 slots, given `memory`: each site's first window.
    fn first_windows(kind: &str, memory: CapacityMemory) -> Vec<u32> {
        let spec = super::super::RunSpec {
            n_jobs: 1000,
            sites: ["a", "b"]
                .iter()
                .map(|n| super::super::SiteInfo { slots: Some(64), ..super::super::SiteInfo::named(*n) })
                .collect(),
            kind_keys: vec![kind.to_string()],
            memory,
            max_attempts: 3,
            ..Default::default()
        };
        let config = super::super::PolicyConfig::named("adaptive").expect("the default policy");
        let policy = super::super::build(&config, &spec, None).expect("adaptive builds without the truth");
        (0..2).map(|i| policy.site_view(super::super::SiteId(i)).window).collect()
    }

    #[test]
    fn adaptive_starts_a_kind_at_its_own_knee_and_a_new_kind_from_what_is_the_sites() {
        let initial = super::super::adaptive::Params::default().initial_window;
        let cold = first_windows("io", CapacityMemory::new());
        assert_eq!(cold, [initial, initial]);
        let mut m = CapacityMemory::new();
        // At "a" the io kind found its knee at 4 (seen degraded at 6); at
        // "b" the cpu kind learned only that the site started nothing.
        m.insert("a", "io", SiteMemory { ceiling: Some(6.0), ..learned(4.0, 10.0) });
        m.insert("b", "cpu", SiteMemory { unresponsive: true, ..SiteMemory::default() });
        assert_eq!(first_windows("io", m.clone()), [4, 1], "io: its own knee at a, b's silence carried");
        assert_eq!(first_windows("cpu", m), [initial, 1], "cpu: not io's knee at a; b is its own");
    }

    #[test]
    fn a_new_kind_inherits_the_sites_wait_starts_and_failures_but_not_the_knee_or_run_times() {
        let mut m = CapacityMemory::new();
        m.insert("a", "io", learned(4.0, 10.0));
        m.insert("a", "cpu", learned(40.0, 12.0));
        let carried = m.carried_over("a").expect("the site was learned");
        // From the kind learned last there.
        assert_eq!(carried.mean_wait, Some(12.0));
        assert_eq!(carried.starts_one_by_one, Some(true));
        assert_eq!(carried.attempts, Some((30, 2)));
        assert!(!carried.unresponsive);
        assert_eq!(
            (carried.capacity, carried.ceiling, carried.baseline_runtime, carried.runtime_quantiles),
            (None, None, None, None)
        );
        assert_eq!(m.carried_over("nowhere"), None);
        m.insert("b", UNKNOWN_KIND, SiteMemory { unresponsive: true, ..SiteMemory::default() });
        assert!(m.carried_over("b").is_some_and(|c| c.unresponsive));
    }
}
