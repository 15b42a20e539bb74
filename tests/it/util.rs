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
