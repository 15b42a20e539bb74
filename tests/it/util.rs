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
    Command::new(cosched_bin())
        .args(args)
        .current_dir(dir)
        // What a run learns stays in `dir`, never in the user's memory.
        .env(cosched::state::memory::MEMORY_ENV, dir.join("memory.db"))
        .output()
        .expect("cosched binary runs")
}

/// A fresh temporary directory, removed when dropped.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// A site of the fake pool with `slots` slots, short queue waits (5 s), no
/// contention and no failures: tests override the fields they care about.
pub fn quick_site(slots: u32) -> cosched::sim::SiteParams {
    cosched::sim::SiteParams { wait_mean: 5.0, ..cosched::sim::SiteParams::healthy("", slots) }
}

/// The real HTCondor logs in `../shared/fixtures/userlogs`, sorted.
pub fn shared_logs() -> Vec<PathBuf> {
    let dir = shared().join("fixtures/userlogs");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 5, "expected the shared fixtures in {}", dir.display());
    logs
}

/// xorshift64*: a test's own seeded randomness (print the seed for reruns).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Writes `job.sh` (echoes its argument) and a `job.sub` that runs it once
/// per cosched job into `dir`: the job every fake-HTCondor test submits.
pub fn write_echo_job(dir: &Path) {
    std::fs::write(dir.join("job.sh"), "#!/bin/sh\necho job $1\n").unwrap();
    std::fs::write(
        dir.join("job.sub"),
        "executable = job.sh\narguments = $(CoschedJob)\noutput = out.$(CoschedJob)\nqueue\n",
    )
    .unwrap();
}

/// The policy is woken by events and by its own deadlines, not polled
/// ([`cosched::sim::woken_too_often`]).
pub fn assert_woken_by_events(r: &cosched::sim::SimResult, case: &str) {
    assert!(
        !cosched::sim::woken_too_often(r.wakeups, r.events),
        "{case}: the policy was woken {} times for {} site events (a deadline that keeps coming due?)",
        r.wakeups,
        r.events
    );
}

/// What a simulated run of one kind learned at `site` (under the one
/// kind's key, its type name).
pub fn at<'a>(memory: &'a cosched::policy::CapacityMemory, site: &str) -> &'a cosched::policy::SiteMemory {
    memory
        .get(site, cosched::policy::jobtype::SINGLE_TYPE)
        .unwrap_or_else(|| panic!("nothing learned at {site}: {memory:?}"))
}

/// A memory of `site` for the one kind of a simulated run.
pub fn remembered(site: &str, memory: cosched::policy::SiteMemory) -> cosched::policy::CapacityMemory {
    let mut m = cosched::policy::CapacityMemory::new();
    m.insert(site, cosched::policy::jobtype::SINGLE_TYPE, memory);
    m
}

/// Two submit descriptions in `dir` for a run of two kinds (issue 55),
/// `io.sub` and `cpu.sub`: each passes its own marker, the kind's name and
/// the job's index to the job, so a job's arguments show which description
/// it was submitted with and what `$(CoschedType)` and `$(CoschedJob)` were.
pub fn write_two_kinds(dir: &Path) {
    write_echo_job(dir);
    for kind in ["io", "cpu"] {
        std::fs::write(
            dir.join(format!("{kind}.sub")),
            format!(
                "executable = job.sh\narguments = from-{kind} $(CoschedType) $(CoschedJob)\n\
                 output = out.$(CoschedJob)\nqueue\n"
            ),
        )
        .unwrap();
    }
}

/// Every successful execution of `history` (one run of the two kinds of
/// [`write_two_kinds`], `io` and `cpu` jobs as `counts` says) ran its own
/// kind's description, with its kind's name as attribute and macro; the
/// kinds alternate over the run's indexes in their proportions.
pub fn assert_each_job_of_its_kind<'a>(
    history: impl Iterator<Item = &'a cosched::fake_condor::HistoryRecord>,
    counts: (usize, usize),
    context: &str,
) {
    let mut kind_of = std::collections::BTreeMap::new();
    for r in history.filter(|r| r.status == cosched::fake_condor::HistoryStatus::Succeeded) {
        let job = r.job.expect("CoschedJob");
        let kind = r.kind.clone().unwrap_or_else(|| panic!("{context}: job {job} has no CoschedType"));
        assert_eq!(r.args, format!("from-{kind} {kind} {job}"), "{context}: job {job}");
        kind_of.insert(job, kind);
    }
    let io: Vec<u64> = kind_of.iter().filter(|(_, k)| *k == "io").map(|(j, _)| *j).collect();
    assert_eq!((io.len(), kind_of.len() - io.len()), counts, "{context}: {kind_of:?}");
    let n = (counts.0 + counts.1) as u64;
    for prefix in 1..=n {
        let seen = io.iter().filter(|j| **j < prefix).count() as f64;
        let due = prefix as f64 * counts.0 as f64 / n as f64;
        assert!((seen - due).abs() <= 1.0, "{context}: {seen} io jobs among the first {prefix}: {io:?}");
    }
}
