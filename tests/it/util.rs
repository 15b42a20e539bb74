//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The project's root (where Cargo.toml is).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared` beside the checkout (CI has it there too).
pub fn shared() -> PathBuf {
    root().join("..").join("shared")
}

/// The built `cosched` binary.
pub fn cosched_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cosched"))
}

/// Runs `cosched ARGS…` in `dir` and returns its output.
pub fn cosched(dir: &Path, args: &[&str]) -> Output {
    Command::new(cosched_bin()).args(args).current_dir(dir).output().expect("cosched binary runs")
}

/// A fresh temporary directory, removed when dropped.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// A site of the fake pool with `slots` slots, short queue waits (5 s), no
/// contention and no failures: tests override the fields they care about.
pub fn quick_site(slots: u32) -> cosched::sim::SiteParams {
    cosched::sim::SiteParams {
        name: String::new(),
        slots,
        wait_mean: 5.0,
        capacity: cosched::sim::Capacity::Infinite,
        beta: 0.0,
        speed: 1.0,
        p_fail: 0.0,
        cap_windows: Vec::new(),
        dead: false,
    }
}
