//! The simulated grid: the site model of `shared/scenarios/README.md`, run in
//! virtual time as a backend of the real engine (being written).

pub mod model;

pub use model::{Capacity, Scenario, SiteParams};
