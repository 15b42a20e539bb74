//! Integration tests: `cosched bench` as a user runs it.

use crate::util;
use std::path::Path;

const SMALL: &str = r#"
[scenarios.tiny]
desc = "two sites, one congested"
n_jobs = 60
base_runtime = 100
jitter = 0.2
sites = [
  { name = "a", slots = 20, capacity = 8, beta = 0.5, wait_mean = 5 },
  { name = "b", slots = 10, capacity = "inf", wait_mean = 20, p_fail = 0.1 },
]

[scenarios.stuck]
n_jobs = 20
base_runtime = 100
sites = [ { name = "a", slots = 10 }, { name = "dead", slots = 10, dead = true } ]
"#;

fn write_small(dir: &Path) -> String {
    let path = dir.join("small.toml");
    std::fs::write(&path, SMALL).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn json_has_one_object_per_run_with_the_documented_fields() {
    let dir = util::tempdir();
    let file = write_small(dir.path());
    let out = util::cosched(
        dir.path(),
        &[
            "bench", &file, "--policy", "bulk", "--policy", "oracle", "--seeds", "1-2", "--json", "--jobs",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2 * 2 * 2, "scenarios × policies × seeds");
    for l in &lines {
        for field in [
            "scenario",
            "policy",
            "seed",
            "makespan",
            "mean_turnaround",
            "p95_turnaround",
            "mean_completion",
            "hang",
        ] {
            assert!(l.get(field).is_some(), "missing {field} in {l}");
        }
        // Woken at least once per batch of events, and not polled.
        let (wakeups, events) = (l["wakeups"].as_u64().unwrap(), l["events"].as_u64().unwrap());
        assert!(wakeups > 0 && wakeups <= 10 * events + 1000, "{l}");
        let stuck = l["scenario"] == "stuck";
        // bulk sends half the jobs to the dead site and hangs; the oracle does not.
        assert_eq!(l["hang"], stuck && l["policy"] == "bulk", "{l}");
        if l["hang"] == false {
            assert!(l["makespan"].as_f64().unwrap() >= 80.0, "{l}");
            assert!(l["mean_completion"].as_f64().unwrap() <= l["makespan"].as_f64().unwrap(), "{l}");
        } else {
            assert!(l["makespan"].is_null(), "{l}");
        }
    }
}

#[test]
fn table_shows_every_selected_policy_with_ratios() {
    let dir = util::tempdir();
    let file = write_small(dir.path());
    let out = util::cosched(
        dir.path(),
        &["bench", &file, "--scenario", "tiny", "--policy", "jobrouter", "--seeds", "1,2"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("/oracle") && text.contains("/bulk"), "{text}");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("tiny")).collect();
    assert_eq!(rows.len(), 1, "only the selected policy is shown: {text}");
    assert!(rows[0].contains("jobrouter") && rows[0].contains("0/2"), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("runs/s"));
}

#[test]
fn trace_prints_the_decisions_of_one_run_and_is_deterministic() {
    let dir = util::tempdir();
    let file = write_small(dir.path());
    let args = ["bench", &file, "--scenario", "tiny", "--policy", "oracle", "--seeds", "4", "--trace"];
    let a = util::cosched(dir.path(), &args);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let text = String::from_utf8(a.stdout.clone()).unwrap();
    assert!(text.lines().any(|l| l.contains(" a ") && l.contains("submit")), "{text}");
    assert!(text.contains("makespan"), "{text}");
    assert_eq!(a.stdout, util::cosched(dir.path(), &args).stdout, "same seed, same trace");
}

#[test]
fn an_adaptive_trace_shows_the_windows_and_verdicts_behind_its_submissions() {
    let dir = util::tempdir();
    let file = write_small(dir.path());
    let args = ["bench", &file, "--scenario", "tiny", "--policy", "adaptive", "--seeds", "4", "--trace"];
    let out = util::cosched(dir.path(), &args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    // Site `a` has its knee (8) under the first window (16): it is judged.
    assert!(text.lines().any(|l| l.contains(" a ") && l.contains("verdict")), "{text}");
    // Every submission's window is the one the last `window` line of its
    // site announced, so the decisions are in time order before the
    // actions they explain.
    let mut windows = std::collections::HashMap::new();
    let mut submits = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, site, action, jobs, ..] = fields[..] else { continue };
        match action {
            "window" => {
                windows.insert(site.to_string(), jobs.to_string());
            }
            "submit" => {
                let said = line.split("window ").nth(1).and_then(|w| w.split_whitespace().next()).unwrap();
                assert_eq!(windows.get(site).map(String::as_str), Some(said), "{line}\n{text}");
                submits += 1;
            }
            _ => {}
        }
    }
    assert!(submits > 2, "{text}");
}

#[test]
fn warm_runs_report_the_last_run_of_the_chain() {
    let dir = util::tempdir();
    let file = write_small(dir.path());
    let run = |extra: &[&str]| -> serde_json::Value {
        let mut args =
            vec!["bench", &file, "--scenario", "tiny", "--policy", "adaptive", "--seeds", "1", "--json"];
        args.extend_from_slice(extra);
        let out = util::cosched(dir.path(), &args);
        assert!(out.status.success(), "{extra:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (cold, warm, one, three) =
        (run(&[]), run(&["--warm"]), run(&["--warm-runs", "1"]), run(&["--warm-runs", "3"]));
    assert_eq!((cold["warm"].clone(), cold["warm_runs"].clone()), (false.into(), 0.into()));
    assert_eq!((warm["warm"].clone(), warm["warm_runs"].clone()), (true.into(), 1.into()));
    assert_eq!(three["warm_runs"], 3);
    // --warm is one warm run: the same run, measured the same.
    assert_eq!(warm["makespan"], one["makespan"]);
    assert_eq!(warm["events"], one["events"]);
    // A warm run starts from what the cold one learned, so it is not the
    // cold run again.
    assert_ne!(cold["events"], warm["events"], "the warm run replayed the cold one");
    let out = util::cosched(dir.path(), &["bench", &file, "--warm-runs", "0"]);
    assert_eq!(out.status.code(), Some(2), "no warm run is not a warm run");
}

#[test]
fn usage_errors_exit_2() {
    let dir = util::tempdir();
    let file = write_small(dir.path());
    let out = util::cosched(dir.path(), &["bench", &file, "--scenario", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tiny"), "lists the scenarios");
    let out = util::cosched(dir.path(), &["bench", &file, "--trace"]);
    assert_eq!(out.status.code(), Some(2), "--trace needs a single run");
    let out = util::cosched(dir.path(), &["bench", &file, "--policy", "fifo"]);
    assert_eq!(out.status.code(), Some(2));
    let out = util::cosched(dir.path(), &["bench", "missing.toml"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn compare_sets_two_json_files_side_by_side_per_grid() {
    let dir = util::tempdir();
    let file = write_small(dir.path());
    let run = |extra: &[&str]| {
        let mut args =
            vec!["bench", file.as_str(), "--policy", "adaptive", "--seeds", "1-3", "--json", "--jobs", "2"];
        args.extend_from_slice(extra);
        let out = util::cosched(dir.path(), &args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let base = dir.path().join("base.jsonl");
    std::fs::write(&base, run(&[])).unwrap();
    // The same runs compare as equal on every grid that finishes.
    let out = util::cosched(dir.path(), &["bench", "--compare", "base.jsonl", "base.jsonl"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("adaptive: 2 grids, 3 seed(s) each"), "{text}");
    assert!(text.contains("geometric mean 1.0000") && text.contains("slower on 0, faster on 0"), "{text}");
    // NEW with every makespan doubled: each grid's median doubles.
    let doubled: String = std::fs::read_to_string(&base)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if let Some(m) = v["makespan"].as_f64() {
                v["makespan"] = (2.0 * m).into();
            }
            format!("{v}\n")
        })
        .collect();
    std::fs::write(dir.path().join("new.jsonl"), doubled).unwrap();
    let out = util::cosched(dir.path(), &["bench", "--compare", "base.jsonl", "new.jsonl"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("geometric mean 2.0000") && text.contains("slower on 2, faster on 0"), "{text}");
    // A line that is not a run: the file and line, and exit 2.
    std::fs::write(dir.path().join("bad.jsonl"), "\n{\"scenario\": \"tiny\"}\n").unwrap();
    let out = util::cosched(dir.path(), &["bench", "--compare", "base.jsonl", "bad.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad.jsonl:2:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Two benches' runs in one file: said, not silently paired.
    let twice = format!("{0}{0}", std::fs::read_to_string(&base).unwrap());
    std::fs::write(dir.path().join("twice.jsonl"), twice).unwrap();
    let out = util::cosched(dir.path(), &["bench", "--compare", "twice.jsonl", "base.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a second run"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // No scenario file and no --compare: a usage error.
    assert_eq!(util::cosched(dir.path(), &["bench"]).status.code(), Some(2));
}
