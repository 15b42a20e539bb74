//! Integration tests: what runs remember per site and kind of job, and how
//! it is seen (`cosched memory`, the run's start line) and forgotten
//! (`cosched memory forget`); which job is which kind (`cosched check`'s
//! memory keys). Runs are `--simulate`d, each in a fresh directory.

use crate::util;
use cosched::policy::{CapacityMemory, DecisionKind, SiteId, SiteMemory};
use cosched::state::MemoryDb;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Two simulated grid sites, quick jobs.
const SITES: &str = "[simulate]\nbase_runtime = 20\njitter = 0.1\nseed = 5\n\n\
    [[site]]\nname = \"alpha\"\ngrid_resource = \"condor alpha.example alpha.example:9619\"\nslots = 6\n\
    [site.simulate]\nwait_mean = 2\n\n\
    [[site]]\nname = \"beta\"\ngrid_resource = \"condor beta.example beta.example:9619\"\nslots = 6\n\
    [site.simulate]\nwait_mean = 2\n";

/// A fresh directory with [`SITES`] and the echo job.
fn setup() -> tempfile::TempDir {
    let dir = util::tempdir();
    util::write_echo_job(dir.path());
    std::fs::write(dir.path().join("sites.toml"), SITES).unwrap();
    dir
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `cosched submit 12 sites.toml job.sub --simulate --state-dir STATE`
/// and `extra`, which must succeed.
fn run(dir: &Path, state: &str, extra: &[&str]) -> Output {
    let mut args = vec!["submit", "12", "sites.toml", "job.sub", "--simulate", "--speedup", "1000"];
    args.extend_from_slice(&["--state-dir", state]);
    args.extend_from_slice(extra);
    let out = util::cosched(dir, &args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: stderr:\n{}", text(&out.stderr));
    out
}

/// `cosched ARGS…` in `dir`: (exit code, stdout, stderr).
fn cosched(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = util::cosched(dir, args);
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// The memory key `cosched check` gives `job` (`memory key: KEY`).
fn key_of(dir: &Path, job: &str) -> String {
    let (code, stdout, stderr) = cosched(dir, &["check", "sites.toml", job]);
    assert_eq!(code, Some(0), "{stderr}");
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("memory key: "))
        .map(|k| k.split_whitespace().next().unwrap_or_default().to_string())
        .unwrap_or_else(|| panic!("no memory key in:\n{stdout}"))
}

/// The first window the policy gave `site` in the one run in `state`.
fn first_window(state: &Path, site: u32) -> f64 {
    let runs: Vec<PathBuf> =
        std::fs::read_dir(state.join("runs")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    cosched::run::decisions::read(&runs[0])
        .into_iter()
        .find_map(|d| match d.kind {
            DecisionKind::Window { window, .. } if d.site == SiteId(site) => Some(window),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{}: no window for site #{site}", runs[0].display()))
}

/// Issue 55 (2a): a run says which memory it reads and writes and, per
/// kind, where it starts from what was remembered: new the first time,
/// warm at both sites the second; `--json` has the same in its summary.
#[test]
fn a_second_run_says_it_starts_warm_and_from_which_file() {
    let dir = setup();
    // The path is said as the run keeps it (absolute).
    let start_line = |out: &Output| {
        let stderr = text(&out.stderr);
        let line = stderr.lines().find(|l| l.starts_with("cosched: memory ")).map(str::to_string);
        line.unwrap_or_else(|| panic!("no memory line in:\n{stderr}"))
    };
    let first = run(dir.path(), "s1", &["--memory", "m.db"]);
    assert!(start_line(&first).ends_with("/m.db: job new"), "{}", start_line(&first));
    let second = run(dir.path(), "s2", &["--memory", "m.db"]);
    assert!(start_line(&second).ends_with("/m.db: job warm at alpha, beta"), "{}", start_line(&second));
    let third = run(dir.path(), "s3", &["--memory", "m.db", "--json"]);
    let summary: serde_json::Value = serde_json::from_slice(&third.stdout).expect("--json is JSON");
    let memory = &summary["memory"];
    assert!(memory["path"].as_str().is_some_and(|p| p.ends_with("/m.db")), "{summary}");
    assert_eq!(memory["kinds"][0]["key"], key_of(dir.path(), "job.sub").as_str(), "{summary}");
    assert_eq!(memory["kinds"][0]["warm"], serde_json::json!(["alpha", "beta"]), "{summary}");
}

/// Issue 55 (2b): `cosched memory` shows each site and kind a run learned,
/// from the file `submit` would use: `--memory PATH`, a `--simulate`
/// run's state directory, or COSCHED_MEMORY.
#[test]
fn memory_shows_what_runs_learned_where_submit_keeps_it() {
    let dir = setup();
    let key = key_of(dir.path(), "job.sub");
    run(dir.path(), "s1", &["--memory", "m.db"]);
    let (code, stdout, stderr) = cosched(dir.path(), &["memory", "--memory", "m.db"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("memory m.db: 2 site(s), 1 kind(s)"), "{stdout}");
    for site in ["alpha", "beta"] {
        let line = stdout.lines().find(|l| l.trim_start().starts_with(site));
        assert!(line.is_some_and(|l| l.contains(&key)), "{site} under {key}:\n{stdout}");
    }
    let (_, json, _) = cosched(dir.path(), &["memory", "--json", "--memory", "m.db"]);
    let json: serde_json::Value = serde_json::from_str(&json).expect("--json is JSON");
    let sites: Vec<&str> =
        json["entries"].as_array().unwrap().iter().filter_map(|e| e["site"].as_str()).collect();
    assert_eq!(sites, ["alpha", "beta"], "{json}");
    assert!(json["entries"][0]["memory"]["mean_wait"].is_number(), "{json}");

    // A --simulate run without --memory keeps it in its state directory.
    run(dir.path(), "s2", &[]);
    let (code, stdout, _) = cosched(dir.path(), &["memory", "--state-dir", "s2"]);
    assert_eq!(code, Some(0));
    assert!(stdout.starts_with("memory s2/memory.db: 2 site(s)"), "{stdout}");
    // COSCHED_MEMORY (the test's memory.db), as for `submit`: nothing yet.
    let (code, stdout, _) = cosched(dir.path(), &["memory"]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("memory.db: nothing remembered"), "{stdout}");
    assert!(!dir.path().join("memory.db").exists(), "showing created it");

    let (code, _, stderr) = cosched(dir.path(), &["memory", "forget", "gamma", "--memory", "m.db"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("`gamma`") && stderr.contains("alpha, beta"), "known sites are named: {stderr}");
    let (code, _, stderr) =
        cosched(dir.path(), &["memory", "forget", "alpha", "--kind", "cpu", "--memory", "m.db"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&key), "the kinds known there are named: {stderr}");
}

/// Issue 55 (2b): what is forgotten at a site is not started from there:
/// the next run starts cold at that site, warm at the other.
#[test]
fn forget_a_site_and_the_next_run_starts_cold_there() {
    let dir = setup();
    run(dir.path(), "cold", &["--no-memory"]);
    let cold_window = first_window(&dir.path().join("cold"), 0);
    const KNEE: f64 = 3.0;
    assert_ne!(cold_window, KNEE, "the test needs a knee that is no cold start's window");
    // Each site's knee for this job, as a run would have kept it.
    let key = key_of(dir.path(), "job.sub");
    let mut m = CapacityMemory::new();
    for site in ["alpha", "beta"] {
        let knee = SiteMemory { capacity: Some(KNEE), ceiling: Some(KNEE + 1.0), ..SiteMemory::default() };
        m.insert(site, key.as_str(), knee);
    }
    MemoryDb::open(&dir.path().join("m.db")).unwrap().save("seeded", &m).unwrap();

    let (code, stdout, stderr) = cosched(dir.path(), &["memory", "forget", "alpha", "--memory", "m.db"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("forgot") && stdout.contains("alpha"), "{stdout}");
    let (_, stdout, _) = cosched(dir.path(), &["memory", "--memory", "m.db"]);
    assert!(!stdout.contains("alpha") && stdout.contains("beta"), "{stdout}");

    run(dir.path(), "after", &["--memory", "m.db"]);
    let state = dir.path().join("after");
    assert_eq!(first_window(&state, 0), cold_window, "alpha, forgotten, starts cold");
    assert_eq!(first_window(&state, 1), KNEE, "beta starts at its knee");

    let (code, stdout, stderr) = cosched(dir.path(), &["memory", "forget", "--all", "--memory", "m.db"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("forgot everything"), "{stdout}");
    let (_, stdout, _) = cosched(dir.path(), &["memory", "--memory", "m.db"]);
    assert!(stdout.contains("nothing remembered"), "{stdout}");
}

/// Issue 55 (2c): a memory file a newer cosched wrote is neither read nor
/// changed, and the run says so and what to do; a damaged one, likewise,
/// with how to start afresh. Both runs finish, cold.
#[test]
fn a_newer_or_damaged_memory_file_is_said_left_alone_and_the_run_starts_cold() {
    let dir = setup();
    let newer = dir.path().join("newer.db");
    newer_memory(&newer);
    let before = std::fs::read(&newer).unwrap();
    let out = run(dir.path(), "s1", &["--memory", "newer.db"]);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("newer cosched") && stderr.contains("--memory PATH"), "{stderr}");
    assert!(stderr.contains("starts cold"), "{stderr}");
    assert!(
        std::fs::read(&newer).unwrap() == before,
        "the newer file was changed (migrated, or switched to WAL)"
    );

    std::fs::write(dir.path().join("damaged.db"), vec![0x5a; 8192]).unwrap();
    let out = run(dir.path(), "s2", &["--memory", "damaged.db"]);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("rm -f ") && stderr.contains("damaged.db-shm`"), "how to start afresh: {stderr}");
}

/// A memory database as a newer cosched could leave it: one schema past
/// this one's, and out of WAL mode, so that any write shows in the file.
fn newer_memory(path: &Path) {
    drop(MemoryDb::open(path).unwrap());
    let conn = rusqlite::Connection::open(path).unwrap();
    let version: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    conn.pragma_update(None, "user_version", version + 1).unwrap();
    let mode: String = conn.query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "delete");
}

/// Issue 55 (1): a kind is the program and files a description names, not
/// their text: `run.sh` next to two descriptions is two programs; one file
/// named three ways, and one memory request in two units, is one kind.
#[test]
fn check_tells_kinds_by_the_files_they_name_not_their_text() {
    let dir = setup();
    for sub in ["A", "B"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
        std::fs::copy(dir.path().join("job.sh"), dir.path().join(sub).join("run.sh")).unwrap();
        std::fs::write(dir.path().join(sub).join("job.sub"), "executable = run.sh\nqueue\n").unwrap();
    }
    let abs = dir.path().join("job.sh");
    let ways = [
        ("plain.sub", "executable = job.sh\narguments = a b\nrequest_memory = 256M\nqueue\n".to_string()),
        (
            "dot.sub",
            "executable = ./job.sh\narguments = \"a b\"\nrequest_memory = 256 MB\nqueue\n".to_string(),
        ),
        (
            "abs.sub",
            format!("executable = {}\narguments = a  b\nrequest_memory = 256\nqueue\n", abs.display()),
        ),
    ];
    for (name, text) in &ways {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let args = [
        "check",
        "sites.toml",
        "--jobs",
        "a=1:A/job.sub",
        "--jobs",
        "b=1:B/job.sub",
        "--jobs",
        "plain=1:plain.sub",
        "--jobs",
        "dot=1:dot.sub",
        "--jobs",
        "abs=1:abs.sub",
    ];
    let (code, stdout, stderr) = cosched(dir.path(), &args);
    assert_eq!(code, Some(0), "{stderr}");
    let line = |kind: &str| {
        stdout
            .lines()
            .find(|l| l.contains(&format!("memory key of {kind}: ")))
            .unwrap_or_else(|| panic!("no key of {kind}:\n{stdout}"))
            .to_string()
    };
    assert!(!line("b").contains("the same as"), "two programs named run.sh share memory:\n{stdout}");
    assert!(line("dot").contains("the same as plain's"), "{stdout}");
    assert!(line("abs").contains("the same as plain's"), "{stdout}");
    assert!(line("a").contains(": fp2:"), "{stdout}");
}
