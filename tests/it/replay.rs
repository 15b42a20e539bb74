//! Integration tests: `cosched replay`. Every fixture log (the project's
//! `fixtures/` and `../shared/fixtures/userlogs/`) is replayed through the
//! `adaptive` and `thesis` policies and the decisions are compared with the
//! checked-in expected output in `tests/golden/replay/`.
//!
//! The goldens change only deliberately: `COSCHED_BLESS=1 cargo test --test it
//! replay::` rewrites them. Re-bless whenever a policy changes, and read the
//! diff before committing it.

use crate::util::{cosched, root, shared};
use std::path::{Path, PathBuf};

const POLICIES: [&str; 2] = ["adaptive", "thesis"];

fn logs_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut logs: Vec<PathBuf> =
        entries.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "log")).collect();
    logs.sort();
    logs
}

fn golden_sites() -> cosched::config::SitesFile {
    let path = root().join("tests/golden/sites.toml");
    cosched::config::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn replay_text(logs: &[PathBuf], policy: &str) -> String {
    match cosched::replay::replay(logs, &golden_sites(), policy) {
        Ok(out) => out.text(),
        Err(e) => format!("# error: {e}\n"),
    }
}

/// Compares `actual` with the golden file, or rewrites it under COSCHED_BLESS=1.
fn check_golden(name: &str, actual: &str, mismatches: &mut Vec<String>) {
    let path = root().join("tests/golden/replay").join(name);
    if std::env::var_os("COSCHED_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        mismatches.push(format!("{}:\n{}", path.display(), diff(&expected, actual)));
    }
}

/// The first differing lines, `-` expected and `+` actual.
fn diff(expected: &str, actual: &str) -> String {
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut out = String::new();
    let mut shown = 0;
    for i in 0..e.len().max(a.len()) {
        let (x, y) = (e.get(i), a.get(i));
        if x != y {
            if let Some(x) = x {
                out += &format!("  line {}: - {x}\n", i + 1);
            }
            if let Some(y) = y {
                out += &format!("  line {}: + {y}\n", i + 1);
            }
            shown += 1;
            if shown == 8 {
                out += &format!("  … ({} vs {} lines)\n", e.len(), a.len());
                break;
            }
        }
    }
    out
}

#[test]
fn replays_match_the_goldens() {
    let mut logs = logs_in(&root().join("fixtures"));
    let shared_logs = logs_in(&shared().join("fixtures/userlogs"));
    assert!(!shared_logs.is_empty(), "shared fixtures present");
    logs.extend(shared_logs.iter().cloned());
    let mut mismatches = Vec::new();
    for policy in POLICIES {
        for log in &logs {
            let stem = log.file_stem().unwrap().to_string_lossy();
            let origin = if log.starts_with(root().join("fixtures")) { "project" } else { "shared" };
            let text = replay_text(std::slice::from_ref(log), policy);
            check_golden(&format!("{origin}-{stem}.{policy}.txt"), &text, &mut mismatches);
        }
        // All shared logs at once: several sites, mapped by GridResource and order.
        check_golden(
            &format!("shared-all.{policy}.txt"),
            &replay_text(&shared_logs, policy),
            &mut mismatches,
        );
    }
    assert!(
        mismatches.is_empty(),
        "replay output differs from tests/golden/replay (if the change is intended, re-bless with \
         COSCHED_BLESS=1 cargo test --test it replay:: and review the diff):\n{}",
        mismatches.join("\n")
    );
}

#[test]
fn replaying_twice_gives_the_same_decisions() {
    let logs = logs_in(&shared().join("fixtures/userlogs"));
    for policy in POLICIES {
        let a = replay_text(&logs, policy);
        let b = replay_text(&logs, policy);
        assert_eq!(a, b, "policy {policy}");
        assert!(a.lines().any(|l| l.starts_with("t=")), "decisions printed for {policy}:\n{a}");
    }
}

#[test]
fn grid_jobs_map_by_grid_resource_and_vanilla_jobs_to_the_first_site() {
    let logs = [
        shared().join("fixtures/userlogs/vanilla-mixed.log"),
        shared().join("fixtures/userlogs/grid-condorc.log"),
    ];
    let out = cosched::replay::replay(&logs, &golden_sites(), "adaptive").expect("replay runs");
    // vanilla-mixed has 30 jobs (29 finished normally or not, all usable);
    // grid-condorc has 10, 8 terminated + 1 removed + 1 held.
    assert!(out.header[0].contains("40 job(s)"), "{:?}", out.header);
    assert!(
        out.header[1].starts_with("# site pool ← 30 sample(s) from vanilla-mixed.log"),
        "{:?}",
        out.header
    );
    assert!(
        out.header[2].starts_with("# site personal ← 10 sample(s) from condor personal@vm 127.0.0.1:9618"),
        "{:?}",
        out.header
    );
    // Jobs are submitted to both sites.
    for site in ["pool", "personal"] {
        assert!(
            out.lines.iter().any(|l| l.text().contains(&format!("site={site} submit"))),
            "a submission to {site}:\n{}",
            out.text()
        );
    }
}

#[test]
fn replay_command_prints_json_lines() {
    let log = shared().join("fixtures/userlogs/legacy-dates.log");
    let sites = root().join("tests/golden/sites.toml");
    let o = cosched(
        &root(),
        &[
            "replay",
            log.to_str().unwrap(),
            "--sites",
            sites.to_str().unwrap(),
            "--policy",
            "thesis",
            "--json",
        ],
    );
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let mut submitted = 0;
    for line in stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if v["kind"] == "decision" && v["action"] == "submit" {
            submitted += v["jobs"].as_u64().unwrap();
        }
    }
    assert!(submitted >= 5, "the 5 recorded jobs are submitted: {stdout}");
    let o = cosched(
        &root(),
        &["replay", log.to_str().unwrap(), "--sites", sites.to_str().unwrap(), "--policy", "nope"],
    );
    assert_eq!(o.status.code(), Some(2), "unknown policy is a usage error");
}

fn one_site() -> cosched::config::SitesFile {
    let tmp = crate::util::tempdir();
    let path = tmp.path().join("sites.toml");
    std::fs::write(&path, "[[site]]\nname = \"a\"\ngrid_resource = \"condor a a:9619\"\n").unwrap();
    cosched::config::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Report #4: a log with a malformed block gave exit 0 (`log stats` and
/// `log report` give 1), and `--json` had no trace of it.
#[test]
fn replay_of_a_log_with_a_malformed_block_exits_1_and_says_so_in_json() {
    let tmp = crate::util::tempdir();
    let log = tmp.path().join("garbage.log");
    let mut text = std::fs::read(shared().join("fixtures/userlogs/vanilla-mixed.log")).unwrap();
    text.extend_from_slice(b"garbage here\n...\n");
    std::fs::write(&log, text).unwrap();
    let sites = root().join("tests/golden/sites.toml");
    let args = ["replay", log.to_str().unwrap(), "--sites", sites.to_str().unwrap(), "--policy", "thesis"];
    let o = cosched(tmp.path(), &args);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let o = cosched(tmp.path(), &[&args[..], &["--json"]].concat());
    assert_eq!(o.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let last: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!((last["kind"].as_str(), last["log_problems"].as_u64()), (Some("input"), Some(1)), "{stdout}");

    let clean = shared().join("fixtures/userlogs/vanilla-mixed.log");
    let o = cosched(tmp.path(), &["replay", clean.to_str().unwrap(), "--sites", sites.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Report #1: a replay ran for a time proportional to the log's span, so a
/// typo'd year made it endless. The job is left out, and said so.
#[test]
fn a_job_of_implausible_length_is_left_out_of_a_replay() {
    let tmp = crate::util::tempdir();
    let log = tmp.path().join("typo_year.log");
    std::fs::write(
        &log,
        "000 (050.000.000) 2026-11-21 05:00:00 Job submitted from host: <h>\n...\n\
         001 (050.000.000) 2126-11-21 05:01:00 Job executing on host: x\n...\n\
         005 (050.000.000) 2126-11-21 05:02:00 Job terminated.\n\t(1) Normal termination (return value 0)\n...\n",
    )
    .unwrap();
    let out = cosched::replay::replay(&[log], &one_site(), "thesis").unwrap();
    assert_eq!(out.input.too_long, ["typo_year.log: 50.0"]);
    assert!(out.header.iter().any(|h| h.contains("1 job(s) left out")), "{:?}", out.header);
}

/// Report #1: a replay that cannot finish stops at a horizon of at most
/// `MAX_HORIZON_SECONDS`, however long the recorded jobs were.
#[test]
fn the_horizon_of_a_replay_that_cannot_finish_is_capped() {
    let tmp = crate::util::tempdir();
    let log = tmp.path().join("held.log");
    let text: String = (0..8)
        .map(|c| {
            format!(
                "000 (05{c}.000.000) 2026-10-01 05:00:00 Job submitted from host: <h>\n...\n\
                 012 (05{c}.000.000) 2026-10-29 05:00:00 Job was held.\n\tboom\n\tCode 1 Subcode 0\n...\n"
            )
        })
        .collect();
    std::fs::write(&log, text).unwrap();
    let out = cosched::replay::replay(&[log], &one_site(), "thesis").unwrap();
    assert_eq!(out.ending, cosched::engine::Ending::Hang);
    assert!(out.input.horizon_capped);
    assert!(out.footer.contains("capped at 180 days"), "{}", out.footer);
}
