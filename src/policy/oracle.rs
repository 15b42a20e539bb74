//! `oracle` policy (being written).

/// Placeholder until the policy is written: behaves like `bulk`.
pub struct Oracle(super::bulk::Bulk);

impl Oracle {
    pub fn new(spec: &super::RunSpec, _truth: &super::Truth) -> Self {
        Oracle(super::bulk::Bulk::new(spec))
    }
}

impl super::Policy for Oracle {
    fn name(&self) -> &'static str {
        "oracle"
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
