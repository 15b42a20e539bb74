//! cosched's one integration-test binary: a module per area.

mod util;

mod adaptive_model;
mod bench;
mod daemon;
mod htcaas;
mod memory;
mod policy;
mod replay;
mod report;
mod sim;
mod streaming;
mod submit;
mod userlog;
