//! `thesis` policy (being written).

use serde::{Deserialize, Serialize};

/// Parameters from the `[policy]` table of sites.toml.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {}

/// Placeholder until the policy is written: behaves like `bulk`.
pub struct Thesis(super::bulk::Bulk);

impl Thesis {
    pub fn new(spec: &super::RunSpec, _params: &Params) -> Self {
        Thesis(super::bulk::Bulk::new(spec))
    }
}

impl super::Policy for Thesis {
    fn name(&self) -> &'static str {
        "thesis"
    }
    fn handle(&mut self, now: super::Time, input: &super::Input) -> Vec<super::Action> {
        self.0.handle(now, input)
    }
    fn next_deadline(&self) -> Option<super::Time> {
        None
    }
    fn book(&self) -> &super::JobBook {
        self.0.book()
    }
    fn site_view(&self, site: super::SiteId) -> super::SiteView {
        self.0.site_view(site)
    }
}
