//! Integration tests: submit.

/// `cosched check`: validation of sites.toml, job.sub and N before anything is
/// submitted. Every bad input exits 2 and names the file and line.
mod check {
    use crate::util;
    use std::path::Path;
    use std::process::Output;

    const GOOD_SITES: &str =
        "[[site]]\nname = \"ce1\"\ngrid_resource = \"condor ce1.example.org ce1.example.org:9619\"\n\n\
                              [[site]]\nname = \"local\"\n";
    const GOOD_JOB: &str =
        "# analysis\nexecutable = run.sh\narguments = $(CoschedJob)\noutput = out.$(CoschedJob)\nqueue\n";

    /// Writes the inputs into a fresh directory and runs `cosched check` there.
    fn check(sites: &str, job: &str, extra: &[&str]) -> Output {
        let dir = util::tempdir();
        std::fs::write(dir.path().join("sites.toml"), sites).unwrap();
        std::fs::write(dir.path().join("job.sub"), job).unwrap();
        write_script(&dir.path().join("run.sh"));
        let mut args = vec!["check", "sites.toml", "job.sub"];
        args.extend_from_slice(extra);
        util::cosched(dir.path(), &args)
    }

    /// The job's program, executable as a user's would be.
    fn write_script(path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, "#!/bin/sh\necho $1\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn stderr(out: &Output) -> String {
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn assert_bad(out: &Output, wants: &[&str]) {
        let err = stderr(out);
        assert_eq!(out.status.code(), Some(2), "exit 2 expected; stderr:\n{err}");
        for want in wants {
            assert!(err.contains(want), "stderr lacks {want:?}:\n{err}");
        }
    }

    #[test]
    fn good_inputs_pass() {
        let out = check(GOOD_SITES, GOOD_JOB, &["--n-jobs", "100"]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("2 site(s)") && stdout.contains("ce1"), "{stdout}");
    }

    #[test]
    fn the_shipped_example_passes() {
        let root = util::root();
        let out =
            util::cosched(&root, &["check", "sites.example.toml", "condor/io_job.sub", "--n-jobs", "375"]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
        assert!(Path::new(&root.join("condor/io_job.sh")).exists());
    }

    /// Every policy parameter is documented in sites.example.toml with its
    /// real default, so the file a user copies never lies.
    #[test]
    fn the_example_documents_every_policy_parameter_with_its_default() {
        let example = std::fs::read_to_string(util::root().join("sites.example.toml")).unwrap();
        let documented: Vec<(String, String)> = example
            .lines()
            .filter_map(|l| l.strip_prefix("#   "))
            .filter_map(|l| {
                let (key, rest) = l.split_once(" = ")?;
                let value = rest.split_whitespace().next()?;
                Some((key.trim().to_string(), value.to_string()))
            })
            .collect();
        let defaults = [
            ("adaptive", toml::Table::try_from(cosched::policy::adaptive::Params::default()).unwrap()),
            ("thesis", toml::Table::try_from(cosched::policy::thesis::Params::default()).unwrap()),
            ("jobrouter", toml::Table::try_from(cosched::policy::jobrouter::Params::default()).unwrap()),
        ];
        for (policy, table) in defaults {
            assert!(!table.is_empty(), "{policy} has parameters");
            for (key, value) in table {
                let doc = documented.iter().find(|(k, _)| *k == key);
                let Some((_, doc_value)) = doc else {
                    panic!("sites.example.toml does not document {policy} parameter `{key}`");
                };
                let parsed: toml::Value = toml::from_str::<toml::Table>(&format!("v = {doc_value}"))
                    .unwrap_or_else(|e| panic!("{policy}.{key}: documented default {doc_value}: {e}"))["v"]
                    .clone();
                let same = match (&parsed, &value) {
                    (toml::Value::Integer(a), toml::Value::Float(b)) => (*a as f64 - b).abs() < 1e-9,
                    (toml::Value::Float(a), toml::Value::Integer(b)) => (a - *b as f64).abs() < 1e-9,
                    (a, b) => a == b,
                };
                assert!(same, "{policy}.{key}: sites.example.toml says {doc_value}, the default is {value}");
            }
        }
    }

    #[test]
    fn warnings_do_not_fail_the_check() {
        let out = check(GOOD_SITES, "executable = run.sh\nlog = mine.log\nqueue 10\n", &[]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("job.sub:3:1: warning") && err.contains("10 jobs"), "{err}");
        assert!(err.contains("job.sub:2:1: warning"), "the user's log is replaced: {err}");
    }

    /// condor_submit expands a misspelt macro to nothing, silently: every
    /// job would write `out.`. `check` names the line and the fix.
    #[test]
    fn a_misspelt_job_index_and_a_file_every_job_writes_are_warned_at_their_lines() {
        let job = "executable = run.sh\narguments = $(CoschedJob)\noutput = out.$(CoschedJb)\nerror = err.txt\nqueue\n";
        let out = check(GOOD_SITES, job, &[]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "warnings, not errors: {err}");
        assert!(
            err.contains("job.sub:3:1: warning: `$(CoschedJb)` is not defined")
                && err.contains("did you mean `$(CoschedJob)`?"),
            "{err}"
        );
        assert!(err.contains("job.sub:4:1: warning: `error = err.txt`: every job writes"), "{err}");
        assert!(
            !stderr(&check(GOOD_SITES, GOOD_JOB, &[])).contains("warning"),
            "GOOD_JOB names files per job"
        );
    }

    /// What would hold every job at a grid site is refused before anything
    /// is submitted.
    #[test]
    fn a_missing_input_file_is_an_error_at_its_line() {
        let job = "executable = run.sh\noutput = out.$(CoschedJob)\ntransfer_input_files = in.$(CoschedJob), lost.dat\nqueue\n";
        assert_bad(&check(GOOD_SITES, job, &[]), &["job.sub:3:1: error", "lost.dat`: no such file"]);
    }

    #[test]
    fn a_limit_the_policy_does_not_honour_is_a_warning_at_its_line() {
        let sites = "[policy]\nname = \"thesis\"\n\n[[site]]\nname = \"ce1\"\n\
                     grid_resource = \"condor ce1.example.org ce1.example.org:9619\"\nmax_jobs = 40\nmax_idle = 5\n";
        let out = check(sites, GOOD_JOB, &[]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "a warning, not an error: {err}");
        assert!(
            err.contains("sites.toml:8:12: warning") && err.contains("does not honour max_idle"),
            "{err}"
        );
        assert!(!err.contains("does not honour max_jobs"), "thesis caps its batches at max_jobs: {err}");
        for policy in ["adaptive", "jobrouter"] {
            let out = check(&sites.replace("thesis", policy), GOOD_JOB, &[]);
            assert!(!stderr(&out).contains("warning"), "{policy} honours both: {}", stderr(&out));
        }
    }

    #[test]
    fn a_first_window_only_adaptive_honours_is_a_warning_at_its_line_under_any_other_policy() {
        let sites = "[policy]\nname = \"adaptive\"\n\n[[site]]\nname = \"ce1\"\n\
                     grid_resource = \"condor ce1.example.org ce1.example.org:9619\"\ninitial_window = 400\n";
        let out = check(sites, GOOD_JOB, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(!stderr(&out).contains("warning"), "adaptive honours it: {}", stderr(&out));
        for policy in ["thesis", "jobrouter", "bulk", "oracle"] {
            let out = check(&sites.replace("\"adaptive\"", &format!("\"{policy}\"")), GOOD_JOB, &[]);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(0), "{policy}: a warning, not an error: {err}");
            assert!(
                err.contains("sites.toml:7:18: warning") && err.contains("does not honour initial_window"),
                "{policy}: {err}"
            );
            assert!(
                err.contains("only policy `adaptive`"),
                "{policy}: the hint names the policy that does: {err}"
            );
        }
    }

    #[test]
    fn toml_syntax_error() {
        assert_bad(
            &check("[[site]]\nname = \"a\"\ngrid_resource = condor\n", GOOD_JOB, &[]),
            &["sites.toml:3:"],
        );
    }

    #[test]
    fn unknown_key() {
        assert_bad(
            &check("[[site]]\nname = \"a\"\ngrid_resourse = \"condor a b\"\n", GOOD_JOB, &[]),
            &["sites.toml:3:1", "grid_resourse"],
        );
        assert_bad(
            &check("[policy]\nname = \"thesis\"\nfoo = 1\n[[site]]\nname = \"a\"\n", GOOD_JOB, &[]),
            &["sites.toml:3:", "foo"],
        );
    }

    /// Every unknown key in one pass, each with its file:line, not just the first.
    #[test]
    fn every_unknown_key_is_reported_at_once() {
        let sites = "[condor]\nretrys = 2\n[[site]]\nname = \"a\"\ngrid_resourse = \"condor a b\"\n\
                     [[site]]\nname = \"b\"\nslot = 4\n";
        assert_bad(
            &check(sites, GOOD_JOB, &[]),
            &[
                "sites.toml:2:1",
                "retrys",
                "sites.toml:5:1",
                "grid_resourse",
                "sites.toml:8:1",
                "slot",
                "expected one of",
            ],
        );
    }

    /// Negative numbers reach cosched's own check, which names the flag.
    #[test]
    fn negative_numbers_get_cosched_s_message_not_clap_s() {
        let out = check(GOOD_SITES, GOOD_JOB, &["--n-jobs", "-3"]);
        assert_bad(&out, &["--n-jobs", "at least 1, got -3"]);
        assert!(!stderr(&out).contains("unexpected argument"), "{}", stderr(&out));
        let dir = util::tempdir();
        let out = util::cosched(dir.path(), &["submit", "-3", "sites.toml", "job.sub", "--simulate"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("at least 1, got -3") && !err.contains("unexpected argument"), "{err}");
    }

    /// `$(Process)` in a file name repeats across batches and sites.
    #[test]
    fn process_in_an_output_name_gets_a_warning_with_the_fix() {
        let job =
            "executable = run.sh\noutput = out.$(Cluster).$(Process)\nerror = err.$(CoschedJob)\nqueue\n";
        let out = check(GOOD_SITES, job, &[]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "a warning, not an error: {err}");
        assert!(err.contains("job.sub:2:1: warning") && err.contains("output = out.$(CoschedJob)"), "{err}");
        assert!(!err.contains("job.sub:3:1"), "$(CoschedJob) is fine: {err}");
    }

    /// `--daemon --simulate` cannot be honoured per run: refused, saying why.
    #[test]
    fn daemon_and_simulate_are_refused_together() {
        let dir = util::tempdir();
        std::fs::write(dir.path().join("sites.toml"), GOOD_SITES).unwrap();
        std::fs::write(dir.path().join("job.sub"), GOOD_JOB).unwrap();
        let out = util::cosched(
            dir.path(),
            &[
                "submit",
                "5",
                "sites.toml",
                "job.sub",
                "--daemon",
                "--simulate",
                "--socket",
                "/nonexistent.sock",
            ],
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("simulate = true"), "says what to set: {err}");
    }

    #[test]
    fn no_sites() {
        assert_bad(&check("[run]\nmax_attempts = 2\n", GOOD_JOB, &[]), &["sites.toml", "[[site]]"]);
    }

    #[test]
    fn duplicate_site_names() {
        let sites = "[[site]]\nname = \"a\"\n\n[[site]]\nname = \"a\"\n";
        assert_bad(&check(sites, GOOD_JOB, &[]), &["sites.toml:5:", "duplicate site name `a`"]);
    }

    #[test]
    fn removed_grid_types_get_a_hint() {
        for kind in ["gt2", "gt5", "cream", "unicore"] {
            let sites = format!("[[site]]\nname = \"old\"\ngrid_resource = \"{kind} gatekeeper.example.edu/jobmanager-pbs\"\n");
            assert_bad(&check(&sites, GOOD_JOB, &[]), &["sites.toml:3:", "removed", "condor HOST HOST:9619"]);
        }
    }

    #[test]
    fn control_characters_cannot_reach_a_submit_file() {
        let newline_in_command =
            "[[site]]\nname = \"a\"\n[site.submit]\nrequirements = \"true\\nqueue 1000\"\n";
        assert_bad(&check(newline_in_command, GOOD_JOB, &[]), &["sites.toml:4:", "newline"]);
        let newline_in_name = "[[site]]\nname = \"a\\nuniverse = local\"\n";
        assert_bad(&check(newline_in_name, GOOD_JOB, &[]), &["sites.toml:2:", "newline"]);
        let bell_in_grid = "[[site]]\nname = \"a\"\ngrid_resource = \"condor a\\u0007 b\"\n";
        assert_bad(&check(bell_in_grid, GOOD_JOB, &[]), &["sites.toml:3:", "U+0007"]);
        assert_bad(
            &check(GOOD_SITES, "executable = run.sh\narguments = a\u{1b}[2J\nqueue\n", &[]),
            &["job.sub:2:1", "U+001B"],
        );
    }

    #[test]
    fn missing_executable() {
        assert_bad(
            &check(GOOD_SITES, "\nexecutable = nothere.sh\nqueue\n", &[]),
            &["job.sub:2:1", "nothere.sh"],
        );
        // A program that exists only on the execute hosts is not looked for.
        let remote = "executable = /opt/site/bin/prog\ntransfer_executable = false\nqueue\n";
        assert_eq!(check(GOOD_SITES, remote, &[]).status.code(), Some(0));
    }

    #[test]
    fn submit_syntax_and_reserved_names() {
        assert_bad(
            &check(GOOD_SITES, "executable = run.sh\nthis is wrong\nqueue\n", &[]),
            &["job.sub:2:1", "key = value"],
        );
        assert_bad(
            &check(GOOD_SITES, "executable = run.sh\n+CoschedJob = 3\nqueue\n", &[]),
            &["job.sub:2:1", "reserved"],
        );
        assert_bad(
            &check(GOOD_SITES, "executable = run.sh\ninclude : other.sub\nqueue\n", &[]),
            &["job.sub:2:1"],
        );
        // The job's kind is the user's to name, with a name cosched accepts.
        let named = check(GOOD_SITES, "executable = run.sh\n+CoschedKind = \"io-heavy\"\nqueue\n", &[]);
        assert_eq!(named.status.code(), Some(0), "stderr:\n{}", stderr(&named));
        assert_bad(
            &check(GOOD_SITES, "executable = run.sh\nMY.CoschedKind = \"a b\"\nqueue\n", &[]),
            &["job.sub:2:1", "kind"],
        );
    }

    #[test]
    fn n_must_be_positive() {
        for n in ["0", "-5"] {
            assert_bad(&check(GOOD_SITES, GOOD_JOB, &[&format!("--n-jobs={n}")]), &["number of jobs", n]);
        }
    }

    /// A run's job book holds every job in memory: a count past what one run
    /// holds is refused before anything is recorded, never an allocation
    /// that aborts the process (and, in the daemon, every restart).
    #[test]
    fn a_count_past_what_one_run_holds_is_refused_with_the_limit() {
        let limit = cosched::policy::MAX_JOBS.to_string();
        let past = (cosched::policy::MAX_JOBS + 1).to_string();
        assert_bad(&check(GOOD_SITES, GOOD_JOB, &["--n-jobs", &past]), &["more than one run holds", &limit]);
        let dir = util::tempdir();
        std::fs::write(dir.path().join("sites.toml"), GOOD_SITES).unwrap();
        for (name, text) in [("io.sub", GOOD_JOB), ("cpu.sub", GOOD_JOB)] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        write_script(&dir.path().join("run.sh"));
        let half = (cosched::policy::MAX_JOBS / 2 + 1).to_string();
        let (io, cpu) = (format!("{half}:io.sub"), format!("{half}:cpu.sub"));
        let out = util::cosched(dir.path(), &["check", "sites.toml", "--jobs", &io, "--jobs", &cpu]);
        assert_bad(&out, &["more than one run holds"]);
        let huge = "9223372036854775807:io.sub";
        let out = util::cosched(dir.path(), &["check", "sites.toml", "--jobs", huge, "--jobs", "1:cpu.sub"]);
        assert_bad(&out, &["more than one run holds"]);
        // Past what its real processes can keep up with, a simulated grid
        // is refused, naming the way to go faster.
        let out = util::cosched(
            dir.path(),
            &["submit", "5", "sites.toml", "io.sub", "--simulate", "--speedup", "1e5"],
        );
        assert_bad(&out, &["at most 10000", "cosched bench"]);
        let out = util::cosched(dir.path(), &["submit", "99999999999999999999", "sites.toml", "io.sub"]);
        assert_bad(&out, &["99999999999999999999 jobs are more than one run holds"]);
        assert!(!dir.path().join("cosched-state").exists(), "nothing recorded");
    }

    /// A level that is no level would be read as a target and silence every
    /// line, warnings included.
    #[test]
    fn a_misspelt_log_level_is_refused_naming_the_levels() {
        let out = check(GOOD_SITES, GOOD_JOB, &["--log-level", "inof"]);
        assert_bad(&out, &["`inof` is not a log level", "warn"]);
        let out = check(GOOD_SITES, GOOD_JOB, &["--log-level", "cosched=debug,warn"]);
        assert_eq!(out.status.code(), Some(0), "directives are tracing's: {}", stderr(&out));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let sites = "[[site]]\nname = \"a\"\ngrid_resource = \"gt2 x\"\n[[site]]\nname = \"a\"\n";
        let out = check(sites, "executable = gone.sh\nqueue\n", &["--n-jobs", "0"]);
        assert_bad(&out, &["sites.toml:3:", "sites.toml:5:", "job.sub:1:1", "number of jobs"]);
    }

    /// Writes `files` beside GOOD_SITES (as sites.toml) and run.sh in a
    /// fresh directory and runs cosched there with `args`.
    fn in_dir_with(files: &[(&str, &str)], args: &[&str]) -> Output {
        let dir = util::tempdir();
        std::fs::write(dir.path().join("sites.toml"), GOOD_SITES).unwrap();
        write_script(&dir.path().join("run.sh"));
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        util::cosched(dir.path(), args)
    }

    /// `memory key[ of KIND]: KEY` lines of `check`'s output: (kind, key).
    fn memory_keys(stdout: &str) -> Vec<(String, String)> {
        stdout
            .lines()
            .filter_map(|l| l.trim().strip_prefix("memory key"))
            .map(|rest| {
                let (whose, key) = rest.split_once(": ").unwrap_or_else(|| panic!("{rest}"));
                let key = key.split_whitespace().next().unwrap_or_default();
                (whose.trim_start_matches(" of ").to_string(), key.to_string())
            })
            .collect()
    }

    /// `fp2:` and 32 hex digits (a 128-bit fingerprint).
    fn is_fingerprint(key: &str) -> bool {
        key.strip_prefix("fp2:").is_some_and(|h| h.len() == 32 && h.chars().all(|c| c.is_ascii_hexdigit()))
    }

    /// Issue 55: `check` prints each kind's memory key, so a person sees
    /// which runs share what they learn: a description's fingerprint, the
    /// same for the same job written another way, another for another job;
    /// or the name the description gives its kind.
    #[test]
    fn check_prints_each_kinds_memory_key() {
        let out = in_dir_with(&[("job.sub", GOOD_JOB)], &["check", "sites.toml", "job.sub"]);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
        let single = memory_keys(&stdout);
        assert_eq!(single.len(), 1, "{stdout}");
        assert_eq!(single[0].0, "", "a run of one kind names no kind: {stdout}");
        assert!(is_fingerprint(&single[0].1), "{stdout}");
        // The same job with its output elsewhere and a comment; another
        // job; a job named by the user.
        let moved = format!("# the same job\noutput = elsewhere.txt\n{GOOD_JOB}");
        let other = GOOD_JOB.replace("executable = ", "request_memory = 2048\nexecutable = ");
        let named = format!("+CoschedKind = \"my-analysis\"\n{GOOD_JOB}");
        let files = [("a.sub", GOOD_JOB), ("b.sub", moved.as_str()), ("c.sub", &other), ("d.sub", &named)];
        let kinds = ["1:a.sub", "1:b.sub", "1:c.sub", "1:d.sub"];
        let mut args = vec!["check", "sites.toml"];
        args.extend(kinds.iter().flat_map(|k| ["--jobs", k]));
        let out = in_dir_with(&files, &args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
        let keys: std::collections::BTreeMap<String, String> = memory_keys(&stdout).into_iter().collect();
        assert_eq!(keys.len(), 4, "{stdout}");
        // The same text in another directory names another `run.sh`, so
        // another program: another key.
        assert!(is_fingerprint(&keys["a"]) && keys["a"] != single[0].1, "{stdout}");
        assert_eq!(keys["b"], keys["a"], "output and comments are not the kind: {stdout}");
        assert!(is_fingerprint(&keys["c"]) && keys["c"] != keys["a"], "request_* is: {stdout}");
        assert_eq!(keys["d"], "name:my-analysis", "{stdout}");
        assert!(stdout.contains("memory key of b: ") && stdout.contains("the same as a's"), "{stdout}");
    }

    /// Issue 55: `check` takes the kinds as `submit` does and checks every
    /// description; an error in the second names that file and its line.
    #[test]
    fn every_kinds_description_is_checked_and_an_error_names_its_file_and_line() {
        let cpu_bad = "executable = run.sh\nthis is wrong\nqueue\n";
        let args = ["check", "sites.toml", "--jobs", "io=40:io.sub", "--jobs", "100:cpu.sub"];
        let out = in_dir_with(&[("io.sub", GOOD_JOB), ("cpu.sub", GOOD_JOB)], &args);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("2 kinds") && stdout.contains("40 × io") && stdout.contains("100 × cpu"),
            "{stdout}"
        );
        let keys = memory_keys(&stdout);
        let (io, cpu) = (&keys[0], &keys[1]);
        assert_eq!((io.0.as_str(), cpu.0.as_str()), ("io", "cpu"), "{stdout}");
        assert!(is_fingerprint(&io.1), "{stdout}");
        assert_eq!(io.1, cpu.1, "one description, one key: {stdout}");
        assert!(stdout.contains("the same as io's"), "two kinds sharing memory are said to: {stdout}");
        let out = in_dir_with(&[("io.sub", GOOD_JOB), ("cpu.sub", cpu_bad)], &args);
        assert_bad(&out, &["cpu.sub:2:1", "key = value"]);
        assert!(!stderr(&out).contains("io.sub:"), "the first description is fine: {}", stderr(&out));
        // A missing executable in the first, a reserved name in the second:
        // both reported in one pass.
        let io_bad = "executable = gone.sh\nqueue\n";
        let cpu_reserved = "executable = run.sh\n\n+CoschedType = \"x\"\nqueue\n";
        let out = in_dir_with(&[("io.sub", io_bad), ("cpu.sub", cpu_reserved)], &args);
        assert_bad(&out, &["io.sub:1:1", "gone.sh", "cpu.sub:3:1", "reserved"]);
    }

    /// Issue 55: what `--jobs` refuses, each saying what to write instead,
    /// before anything is read or submitted.
    #[test]
    fn kinds_on_the_command_line_are_refused_with_what_to_write() {
        let files = [("io.sub", GOOD_JOB), ("cpu.sub", GOOD_JOB), ("my job.sub", GOOD_JOB)];
        let cases: [(&[&str], &[&str]); 8] = [
            (
                &["submit", "5", "sites.toml", "io.sub", "--jobs", "io=3:io.sub"],
                &["do not go together", "cosched submit SITES --jobs io=3:io.sub"],
            ),
            (
                &["check", "sites.toml", "io.sub", "--jobs", "io=3:io.sub"],
                &["JOB and --jobs do not go together"],
            ),
            (&["check", "sites.toml", "--n-jobs", "4", "--jobs", "io=3:io.sub"], &["--n-jobs and --jobs"]),
            (
                &["submit", "sites.toml", "--jobs", "io=3:io.sub", "--jobs", "io=4:cpu.sub"],
                &["both name their kind `io`", "--jobs NAME=4:cpu.sub"],
            ),
            (
                &["submit", "sites.toml", "--jobs", "3:io.sub", "--jobs", "4:io.sub"],
                &["both name their kind `io`"],
            ),
            (
                &["submit", "sites.toml", "--jobs", "io.sub"],
                &["expected [NAME=]COUNT:FILE", "--jobs io=400:io.sub"],
            ),
            (&["submit", "sites.toml", "--jobs", "io=0:io.sub"], &["at least 1, got 0"]),
            (
                &["submit", "sites.toml", "--jobs", "3:my job.sub"],
                &["`my job` cannot name", "NAME=3:my job.sub"],
            ),
        ];
        for (args, wants) in cases {
            let out = in_dir_with(&files, args);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{args:?}: exit 2 expected; stderr:\n{err}");
            for want in wants {
                assert!(err.contains(want), "{args:?}: stderr lacks {want:?}:\n{err}");
            }
        }
        let out = in_dir_with(&files, &["submit", "sites.toml", "--jobs", "b@d=3:io.sub"]);
        assert!(stderr(&out).contains("`b@d` cannot name a kind"), "{}", stderr(&out));
        let out = in_dir_with(&files, &["submit", "5x", "sites.toml", "io.sub"]);
        assert!(stderr(&out).contains("must be a whole number, got `5x`"), "{}", stderr(&out));
    }

    /// The two slips a tester made first: N left out, and the two files
    /// given the other way round (read as given, each file's errors were
    /// about the other's syntax). Each is said as what it is.
    #[test]
    fn a_missing_count_and_swapped_files_are_said_as_such() {
        let files = [("io.sub", GOOD_JOB)];
        let cases: [(&[&str], &str); 4] = [
            (
                &["submit", "sites.toml", "io.sub"],
                "N, the number of jobs, is missing: cosched submit N sites.toml io.sub",
            ),
            (&["submit", "5", "io.sub", "sites.toml"], "SITES is io.sub and JOB is sites.toml; swap them"),
            (&["check", "io.sub", "sites.toml"], "SITES is io.sub and JOB is sites.toml; swap them"),
            (&["submit", "5", "sites.toml"], "give the jobs to run"),
        ];
        for (args, want) in cases {
            let out = in_dir_with(&files, args);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{args:?}: exit 2 expected; stderr:\n{err}");
            assert!(err.contains(want), "{args:?}: stderr lacks {want:?}:\n{err}");
        }
    }

    #[test]
    fn unreadable_inputs() {
        let dir = util::tempdir();
        let out = util::cosched(dir.path(), &["check", "nope.toml", "nope.sub"]);
        assert_bad(&out, &["nope.toml", "nope.sub"]);
    }
}

/// `cosched submit` end to end through the fake HTCondor (issue 5): every job
/// runs exactly once, bad input submits nothing, transient and permanent
/// `condor_submit` failures, and `kill -9` at random moments then `--resume`.
/// Each test installs its own fake pool at a high speedup; runs are bounded by
/// timeouts, never synchronised by sleeps.
mod e2e {
    use crate::util;
    use cosched::fake_condor::{self, FakeSite, HistoryStatus, PoolConfig};
    use cosched::policy::{DecisionKind, SiteId};
    use cosched::sim::{Capacity, SiteParams};
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Output, Stdio};
    use std::time::{Duration, Instant};

    /// Simulated seconds per real second in these tests.
    const SPEEDUP: f64 = 400.0;
    /// Longest any one cosched process may take here.
    const PATIENCE: Duration = Duration::from_secs(60);

    /// A pool and input files in a fresh directory: three sites — a good one,
    /// one that degrades past 4 concurrent jobs, and a dead one with an idle
    /// timeout.
    struct Setup {
        dir: tempfile::TempDir,
        pool: PathBuf,
    }

    impl Setup {
        fn new(tweak: impl FnOnce(&mut PoolConfig)) -> Setup {
            let dir = util::tempdir();
            let pool = dir.path().join("pool");
            let degrading = SiteParams { capacity: Capacity::Finite(4.0), beta: 1.0, ..util::quick_site(16) };
            let dead = SiteParams { dead: true, ..util::quick_site(8) };
            let mut config = PoolConfig {
                speedup: SPEEDUP,
                base_runtime: 60.0,
                jitter: 0.2,
                seed: 7,
                sites: vec![
                    FakeSite::grid("condor good.example good.example:9619", util::quick_site(8)),
                    FakeSite::grid("condor slow.example slow.example:9619", degrading),
                    FakeSite::grid("condor dead.example dead.example:9619", dead),
                ],
                ..PoolConfig::default()
            };
            tweak(&mut config);
            let bin = fake_condor::install_with_exe(&pool, &config, &util::cosched_bin())
                .expect("fake pool installs");
            util::write_echo_job(dir.path());
            let sites = format!(
                "[condor]\nbin_dir = \"{}\"\nsubmit_timeout = 20\nretries = 6\npoll_interval = 0.2\n\n\
                 [[site]]\nname = \"good\"\ngrid_resource = \"condor good.example good.example:9619\"\nslots = 8\n\n\
                 [[site]]\nname = \"slow\"\ngrid_resource = \"condor slow.example slow.example:9619\"\nslots = 16\n\n\
                 [[site]]\nname = \"dead\"\ngrid_resource = \"condor dead.example dead.example:9619\"\nslots = 8\n\
                 idle_timeout = 300\n",
                bin.display()
            );
            std::fs::write(dir.path().join("sites.toml"), sites).unwrap();
            Setup { dir, pool }
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        fn command(&self, args: &[&str]) -> Command {
            let mut cmd = Command::new(util::cosched_bin());
            cmd.args(args)
                .current_dir(self.dir.path())
                .env(fake_condor::POOL_ENV, &self.pool)
                .env("COSCHED_ALLOW_ROOT", "1")
                .env("COSCHED_LOG", "warn")
                // What runs learn stays in the test's directory.
                .env(cosched::state::memory::MEMORY_ENV, self.path("memory.db"))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            cmd
        }

        fn spawn(&self, args: &[&str]) -> Child {
            self.command(args).spawn().expect("cosched starts")
        }

        /// Runs cosched to its end (killed and failed after [`PATIENCE`]).
        fn run(&self, args: &[&str]) -> Output {
            wait_bounded(self.spawn(args), PATIENCE, args)
        }

        fn submit(&self, n: u64, extra: &[&str]) -> Output {
            let n = n.to_string();
            let mut args =
                vec!["submit", n.as_str(), "sites.toml", "job.sub", "--state-dir", "state", "--json"];
            args.extend_from_slice(extra);
            self.run(&args)
        }

        /// condor_submit calls the pool has seen (0 when it never saw one).
        fn submit_calls(&self) -> u64 {
            std::fs::read(self.pool.join("queue.json"))
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|q| q.get("submit_calls").and_then(serde_json::Value::as_u64))
                .unwrap_or(0)
        }

        /// Successful runs per job index, over every proc the pool ever queued.
        fn successes(&self) -> BTreeMap<u64, usize> {
            let mut count = BTreeMap::new();
            for record in fake_condor::history(&self.pool) {
                if record.status == HistoryStatus::Succeeded {
                    *count.entry(record.job.expect("every job carries CoschedJob")).or_insert(0) += 1;
                }
            }
            count
        }

        /// Procs still idle, running or held in the pool.
        fn left_in_queue(&self) -> usize {
            fake_condor::history(&self.pool)
                .iter()
                .filter(|r| matches!(r.status, HistoryStatus::Queued | HistoryStatus::Held))
                .count()
        }

        fn assert_each_job_ran_once(&self, n: u64, context: &str) {
            let successes = self.successes();
            let missing: Vec<u64> = (0..n).filter(|j| !successes.contains_key(j)).collect();
            let twice: Vec<(&u64, &usize)> = successes.iter().filter(|(_, c)| **c > 1).collect();
            assert!(missing.is_empty(), "{context}: jobs that never succeeded: {missing:?}");
            assert!(twice.is_empty(), "{context}: jobs that succeeded more than once: {twice:?}");
            assert_eq!(successes.len() as u64, n, "{context}: successes for jobs outside 0..{n}");
        }
    }

    impl Drop for Setup {
        fn drop(&mut self) {
            let _ = fake_condor::stop(&self.pool);
        }
    }

    #[allow(clippy::disallowed_methods)] // real processes get real-time patience
    fn wait_bounded(mut child: Child, patience: Duration, args: &[&str]) -> Output {
        let start = Instant::now();
        loop {
            match child.try_wait().expect("waiting for cosched") {
                Some(_) => return child.wait_with_output().expect("cosched output"),
                None if start.elapsed() > patience => {
                    // SIGTERM first: cosched then prints where every job is.
                    // SAFETY: kill(2) on our own child's pid.
                    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
                    let deadline = Instant::now() + Duration::from_secs(5);
                    while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let _ = child.kill();
                    let out = child.wait_with_output().expect("cosched output");
                    eprintln!("stdout:\n{}", String::from_utf8_lossy(&out.stdout));
                    panic!(
                        "cosched {args:?} did not finish within {patience:?}\nstderr:\n{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    fn summary(out: &Output) -> serde_json::Value {
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("--json summary on stdout ({e}):\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr))
        })
    }

    #[test]
    fn every_job_succeeds_exactly_once_over_a_good_a_degrading_and_a_dead_site() {
        let s = Setup::new(|_| {});
        let n = 30;
        let out = s.submit(n, &[]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
        let sum = summary(&out);
        assert_eq!(sum["done"], n, "{sum}");
        assert_eq!(sum["failed"], 0, "{sum}");
        s.assert_each_job_ran_once(n, "one run");
        assert_eq!(s.left_in_queue(), 0, "nothing may be left at the sites");
        let dead = &sum["sites"][2];
        assert_eq!(dead["name"], "dead");
        assert_eq!(dead["done"], 0, "the dead site ran nothing: {sum}");
        // The run's report is written beside its logs, and its numbers are
        // those of the run (every job once).
        let (_, json) = run_report(&out);
        assert_eq!(json["summary"]["counts"]["succeeded"], n, "{}", json["summary"]["counts"]);
    }

    /// The most jobs at once waiting at, and out at, the good site, from
    /// a run of `n` jobs with `limits` added to its table in sites.toml.
    fn most_at_the_good_site(limits: &str, n: u64) -> (i32, i32) {
        // Its queue waits as long as its runs: Little's law alone would
        // keep about a window's worth of jobs waiting there.
        let s = Setup::new(|config| config.sites[0].params.wait_mean = 60.0);
        let good = "name = \"good\"\ngrid_resource = \"condor good.example good.example:9619\"\nslots = 8\n";
        let sites = std::fs::read_to_string(s.path("sites.toml")).unwrap();
        assert!(sites.contains(good), "the setup's good site: {sites}");
        std::fs::write(s.path("sites.toml"), sites.replace(good, &format!("{good}{limits}"))).unwrap();
        let out = s.submit(n, &[]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
        s.assert_each_job_ran_once(n, limits);
        // Per attempt there, from the run's own report: waiting from
        // submission to start, out from submission to end.
        let stderr = text(&out.stderr);
        let html = stderr.lines().find_map(|l| l.strip_prefix("cosched: report: ")).expect("report path");
        let csv = std::fs::read_to_string(Path::new(html.trim()).with_file_name("jobs.csv")).unwrap();
        let (mut waiting, mut out_there) = (Vec::new(), Vec::new());
        // The report names sites as the run does.
        for line in csv.lines().skip(1).filter(|l| l.split(',').nth(3) == Some("good")) {
            // From the end: `detail` before them may hold commas.
            let f: Vec<&str> = line.rsplit(',').collect();
            let at = |i: usize| f[i].parse::<f64>().ok();
            let (submitted, started, ended) = (at(5).expect("submitted_s"), at(4), at(3));
            waiting.push((submitted, 1));
            waiting.push((started.or(ended).unwrap_or(f64::INFINITY), -1));
            out_there.push((submitted, 1));
            out_there.push((ended.unwrap_or(f64::INFINITY), -1));
        }
        assert!(!waiting.is_empty(), "the good site ran jobs: {csv}");
        // Logs have whole seconds: at a tie, count the leaving first.
        let most = |mut events: Vec<(f64, i32)>| {
            events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            events
                .iter()
                .scan(0, |n, e| {
                    *n += e.1;
                    Some(*n)
                })
                .max()
                .unwrap_or(0)
        };
        (most(waiting), most(out_there))
    }

    #[test]
    fn a_sites_max_idle_and_max_jobs_are_never_exceeded() {
        let (waiting, _) = most_at_the_good_site("max_idle = 2\n", 40);
        assert!(waiting <= 2, "{waiting} waiting at the good site, max_idle = 2");
        let (_, out) = most_at_the_good_site("max_jobs = 7\n", 40);
        assert!(out <= 7, "{out} out at the good site, max_jobs = 7");
    }

    #[test]
    fn submissions_that_wait_for_a_slow_condor_submit_share_one_and_every_job_runs_once() {
        // condor_submit takes half a real second and jobs about a sixth
        // (60 simulated seconds): while a site's batch is being submitted,
        // jobs there end and the policy asks for more, which queue up.
        let s = Setup::new(|c| c.submit_delay = 0.5);
        let n = 120;
        let out = s.submit(n, &[]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
        assert_eq!(summary(&out)["done"], n);
        s.assert_each_job_ran_once(n, "merged batches");
        assert_eq!(s.left_in_queue(), 0, "nothing may be left at the sites");
        // One condor_submit per submission the policy asked for would be
        // some n of them (adaptive asks for a job or two at a time). How
        // many merged calls a run takes depends on how fast this machine
        // runs the fake pool against the 0.5 s submit (n / 4 idle, n / 3.4
        // loaded), so the bar is halfway, not at the idle figure.
        let calls = s.submit_calls();
        assert!(
            calls * 2 <= n,
            "{calls} condor_submit calls for {n} jobs: waiting submissions were not merged"
        );
    }

    fn write_two_kinds(s: &Setup) {
        util::write_two_kinds(s.dir.path());
    }

    const TWO_KINDS: [&str; 4] = ["--jobs", "io=12:io.sub", "--jobs", "18:cpu.sub"];

    /// Every job of a two-kind run (12 io, 18 cpu) succeeded once, with its
    /// own kind's description, its kind's name as attribute and macro, and
    /// a global index; the kinds alternate over the indexes in their
    /// proportions; each batch file holds one kind.
    fn assert_two_kinds_ran(s: &Setup, context: &str) {
        s.assert_each_job_ran_once(30, context);
        let history = fake_condor::history(&s.pool);
        util::assert_each_job_of_its_kind(history.iter(), (12, 18), context);
        let run_dir = std::fs::read_dir(s.path("state/runs")).unwrap().next().unwrap().unwrap().path();
        for entry in std::fs::read_dir(&run_dir).unwrap().filter_map(Result::ok) {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "sub") {
                let text = std::fs::read_to_string(&path).unwrap();
                let kinds: Vec<&str> = text.lines().filter(|l| l.starts_with("+CoschedType = ")).collect();
                assert_eq!(kinds.len(), 1, "{context}: {}: one kind per batch:\n{text}", path.display());
            }
        }
    }

    #[test]
    fn a_run_of_two_kinds_gives_each_job_its_kind_and_a_global_index() {
        let s = Setup::new(|_| {});
        write_two_kinds(&s);
        let mut args = vec!["submit", "sites.toml"];
        args.extend(TWO_KINDS);
        args.extend(["--state-dir", "state", "--json"]);
        let out = s.run(&args);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
        assert_two_kinds_ran(&s, "two kinds");
        let sum = summary(&out);
        assert_eq!(sum["n_jobs"], 30, "{sum}");
        let kinds: Vec<(String, u64, u64)> = sum["kinds"]
            .as_array()
            .unwrap_or_else(|| panic!("the summary has kinds: {sum}"))
            .iter()
            .map(|k| {
                (
                    k["name"].as_str().unwrap().into(),
                    k["n_jobs"].as_u64().unwrap(),
                    k["done"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(kinds, [("io".into(), 12, 12), ("cpu".into(), 18, 18)]);
        // Per site, the kinds' counts add up to the site's.
        for site in sum["sites"].as_array().unwrap() {
            let per_kind = site["kinds"].as_array().unwrap_or_else(|| panic!("{site}"));
            assert_eq!(per_kind.len(), 2, "{site}");
            let done: u64 = per_kind.iter().map(|k| k["done"].as_u64().unwrap()).sum();
            assert_eq!(done, site["done"].as_u64().unwrap(), "{site}");
            for k in per_kind.iter().filter(|k| k["done"].as_u64().unwrap() > 0) {
                assert!(k["mean_run_time"].as_f64().is_some_and(|t| t > 0.0), "{site}");
            }
            // Each kind's window there, as its controller told it last.
            assert!(per_kind.iter().all(|k| k["window"].as_f64().is_some()), "{site}");
            // The site's capacity is its kinds' added, as the decisions,
            // the report and `status` have it (a tester saw the first
            // kind's alone, 16 beside kinds of 16 and 21.3).
            let kinds_capacity: Vec<f64> = per_kind.iter().filter_map(|k| k["capacity"].as_f64()).collect();
            let site_capacity = site["capacity"].as_f64();
            if kinds_capacity.is_empty() {
                assert_eq!(site_capacity, None, "{site}");
            } else {
                let added: f64 = kinds_capacity.iter().sum();
                assert!(site_capacity.is_some_and(|c| (c - added).abs() < 1e-6), "{site}");
            }
        }
        // The report, from the logs and the clusters' kinds: every job
        // succeeded once, under its kind.
        let (html, json) = run_report(&out);
        assert!(html.contains("<h2>Kinds of job</h2>"), "{html}");
        if let Err(e) = crate::report::xml::check(&html) {
            panic!("report.html with kinds is not well-formed: {e}");
        }
        let rows = json["summary"]["kinds"].as_array().unwrap_or_else(|| panic!("{}", json["summary"]));
        for (kind, n) in [("io", 12), ("cpu", 18)] {
            let succeeded: u64 =
                rows.iter().filter(|r| r["kind"] == kind).map(|r| r["succeeded"].as_u64().unwrap()).sum();
            assert_eq!(succeeded, n, "{kind}: {rows:?}");
        }
        assert!(rows.iter().all(|r| r["kind"] != "?"), "every cluster's kind is known: {rows:?}");
        // The policy's decisions say whose they are: each kind's windows
        // and verdicts name it, a site's window of both kinds none.
        let decided =
            json["summary"]["decisions"].as_array().unwrap_or_else(|| panic!("{}", json["summary"]));
        let mut windowed = std::collections::BTreeSet::new();
        for site in decided {
            assert!(site["windows"].as_array().is_some_and(|w| w.iter().all(|p| p.get("kind").is_none())));
            for p in site["kind_windows"].as_array().into_iter().flatten() {
                windowed.insert(p["kind"].as_str().unwrap_or_else(|| panic!("{p}")).to_string());
            }
            for v in site["verdicts"].as_array().unwrap() {
                assert!(v["kind"] == "io" || v["kind"] == "cpu", "a verdict of its kind: {v}");
            }
        }
        assert_eq!(windowed.into_iter().collect::<Vec<_>>(), ["cpu", "io"], "{decided:?}");
    }

    /// A run of two kinds (with `extra` arguments) stopped by a schedd that
    /// never answers: resumable, with its kinds recorded.
    fn stopped_two_kinds(extra: &[&str]) -> Setup {
        let s = Setup::new(|c| c.submit_transient_fail = 1.0);
        write_two_kinds(&s);
        let sites = std::fs::read_to_string(s.path("sites.toml")).unwrap();
        std::fs::write(
            s.path("sites.toml"),
            sites.replace("[condor]\n", "[condor]\nunreachable_timeout = 3\n"),
        )
        .unwrap();
        let mut args = vec!["submit", "sites.toml"];
        args.extend(TWO_KINDS);
        args.extend(["--state-dir", "state", "--json"]);
        args.extend(extra);
        let out = s.run(&args);
        assert_eq!(out.status.code(), Some(1), "stopped, resumable; stderr:\n{}", text(&out.stderr));
        s
    }

    /// The stopped run's schedd answers again.
    fn schedd_answers_again(s: &Setup) {
        let pool_toml = std::fs::read_to_string(s.pool.join("pool.toml")).unwrap();
        let mut config: PoolConfig = toml::from_str(&pool_toml).unwrap();
        config.submit_transient_fail = 0.0;
        fake_condor::install_with_exe(&s.pool, &config, &util::cosched_bin()).unwrap();
    }

    /// A stopped run of two kinds resumes with its kinds from its record;
    /// a resume given other kinds is refused.
    #[test]
    fn a_run_of_two_kinds_resumes_with_its_kinds_and_refuses_others() {
        let s = stopped_two_kinds(&[]);
        let out = s.run(&["submit", "--resume", "state", "--jobs", "io=12:io.sub"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("other kinds of job") && err.contains("--jobs cpu=18:"), "{err}");
        // A resumed run keeps its policy: another is refused, not ignored.
        let out = s.run(&["submit", "--resume", "state", "--policy", "bulk"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("--policy"), "{}", text(&out.stderr));
        schedd_answers_again(&s);
        let mut again = vec!["submit", "--resume", "state", "--json"];
        again.extend(TWO_KINDS);
        let out = s.run(&again);
        assert_eq!(out.status.code(), Some(0), "the same kinds resume; stderr:\n{}", text(&out.stderr));
        assert_two_kinds_ran(&s, "resumed");
        assert_eq!(summary(&out)["kinds"][1]["done"], 18);
    }

    /// A run told `--blind-types` keeps that when it resumes: the policy
    /// of the resumed run saw one kind, so what it learned is kept under the
    /// run's blind key only, never under one of its kinds'.
    #[test]
    fn a_blind_run_resumes_blind() {
        let s = stopped_two_kinds(&["--blind-types"]);
        let out = s.run(&["submit", "--resume", "state", "--blind-types"]);
        assert_eq!(out.status.code(), Some(2), "--blind-types is the run's, not the resume's");
        assert!(text(&out.stderr).contains("--blind-types"), "{}", text(&out.stderr));
        schedd_answers_again(&s);
        let out = s.run(&["submit", "--resume", "state", "--json"]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
        assert_two_kinds_ran(&s, "resumed blind");
        let m = memory(&s.path("memory.db"));
        let kinds: Vec<&str> = m.iter().map(|(_, kind, _)| kind).collect();
        assert!(!kinds.is_empty(), "the run kept what it learned");
        assert!(
            kinds.iter().all(|k| k.starts_with("blind:fp2:") && k.contains("+fp2:")),
            "a blind run learns of its mix, under its kinds' keys joined: {kinds:?}"
        );
    }

    /// A pool of a healthy site and one whose shared resource saturates at
    /// 4 jobs and thrashes past it, with sites.toml for `policy`; the
    /// adaptive policy starts at the knee so that its first probe past it
    /// is judged.
    fn knee_setup(policy: &str) -> Setup {
        let knee = SiteParams { capacity: Capacity::Finite(4.0), beta: 1.0, ..util::quick_site(32) };
        let s = Setup::new(|c| {
            // The verdict's level is the mean of the running jobs the log
            // shows, so a start the loaded test machine delays by 10 ms is
            // 4 simulated seconds at the suite's speedup, and enough of them
            // put a cohort that thrashed below the knee (3.65 of 4 seen).
            // At a quarter of the speed the same delays cost a quarter.
            c.speedup = SPEEDUP / 4.0;
            c.sites = vec![
                FakeSite::grid("condor good.example good.example:9619", util::quick_site(4)),
                FakeSite::grid("condor knee.example knee.example:9619", knee),
            ];
        });
        let sites = std::fs::read_to_string(s.path("sites.toml")).unwrap();
        let condor = sites.split("[[site]]").next().unwrap();
        let sites = format!(
            "{condor}[policy]\nname = \"{policy}\"\n{}\n\
             [[site]]\nname = \"good\"\ngrid_resource = \"condor good.example good.example:9619\"\nslots = 4\n\n\
             [[site]]\nname = \"knee\"\ngrid_resource = \"condor knee.example knee.example:9619\"\nslots = 32\n",
            if policy == "adaptive" { "initial_window = 4" } else { "" }
        );
        std::fs::write(s.path("sites.toml"), sites).unwrap();
        s
    }

    /// The run's report, from the path cosched prints: the HTML page and report.json.
    fn run_report(out: &Output) -> (String, serde_json::Value) {
        let stderr = text(&out.stderr);
        let html = stderr
            .lines()
            .find_map(|l| l.strip_prefix("cosched: report: "))
            .unwrap_or_else(|| panic!("the report's path is printed: {stderr}"));
        let html = Path::new(html.trim());
        let json = std::fs::read_to_string(html.with_file_name("report.json")).unwrap();
        (std::fs::read_to_string(html).unwrap(), serde_json::from_str(&json).unwrap())
    }

    /// The `<figure>` of one site's decisions in the report, if any.
    fn decisions_figure<'a>(html: &'a str, site: &str) -> Option<&'a str> {
        html.split("<figure ")
            .filter(|f| f.contains(r#"class="decisions""#))
            .find(|f| f.contains(&format!(r#"data-site="{site}""#)))
            .map(|f| &f[..f.find("</figure>").expect("a closed figure")])
    }

    #[test]
    fn the_report_of_an_adaptive_run_shows_the_window_and_the_degraded_verdict_at_a_knee() {
        let s = knee_setup("adaptive");
        let n = 160;
        let out = s.submit(n, &[]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
        s.assert_each_job_ran_once(n, "adaptive run");
        let (html, json) = run_report(&out);
        if let Err(e) = crate::report::xml::check(&html) {
            panic!("report.html with decisions is not well-formed: {e}");
        }
        let figure = decisions_figure(&html, "knee")
            .unwrap_or_else(|| panic!("a decisions chart for the knee site:\n{html}"));
        assert_eq!(figure.matches(r#"class="window""#).count(), 1, "one window line: {figure}");
        assert!(figure.matches(r#"class="verdict degraded""#).count() >= 1, "a degraded verdict: {figure}");
        assert!(figure.contains(r#"class="running""#), "drawn over the running jobs: {figure}");

        // The site tables name sites as the run does, not by their CE.
        let names: Vec<&str> =
            json["summary"]["sites"].as_array().unwrap().iter().filter_map(|s| s["name"].as_str()).collect();
        assert!(
            names.contains(&"knee") && names.iter().all(|n| !n.contains(' ') && !n.ends_with(".log")),
            "{names:?}"
        );
        let series = json["summary"]["decisions"].as_array().expect("report.json has the decisions");
        let knee = series.iter().find(|d| d["site"] == "knee").expect("the knee site's decisions");
        let windows: Vec<f64> =
            knee["windows"].as_array().unwrap().iter().map(|w| w["window"].as_f64().unwrap()).collect();
        assert!(windows.len() >= 2, "the window moved: {windows:?}");
        let makespan = json["summary"]["makespan_s"].as_f64().unwrap();
        let degraded: Vec<&serde_json::Value> =
            knee["verdicts"].as_array().unwrap().iter().filter(|v| v["healthy"] == false).collect();
        assert!(!degraded.is_empty(), "{knee}");
        for v in &degraded {
            let (t, level) = (v["t"].as_f64().unwrap(), v["level"].as_f64().unwrap());
            // On the logs' clock: within the run, and after jobs ran there.
            assert!(t > 0.0 && t <= makespan, "verdict at {t} s of a {makespan} s run: {v}");
            // The level is the mean running the log shows over the cohort;
            // starts the loaded test machine delays pull it down toward
            // the knee (4.0 once, beside a build), not below it at the
            // quarter speed `knee_setup` runs at.
            assert!(level >= 4.0, "judged degraded at or past the knee: {v}");
            assert!(v["slowdown"].as_f64().unwrap() > 1.0, "{v}");
        }
    }

    #[test]
    fn the_report_of_a_bulk_run_shows_no_decisions() {
        let s = knee_setup("bulk");
        let n = 40;
        let out = s.submit(n, &[]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
        let (html, json) = run_report(&out);
        assert!(html.contains(r#"<figure id="running">"#), "the usual report: {html}");
        assert!(!html.contains(r#"class="decisions""#) && !html.contains(r#"id="decisions""#), "{html}");
        assert!(json["summary"].get("decisions").is_none(), "{}", json["summary"]);
    }

    #[test]
    fn a_policy_chosen_on_the_command_line_warns_of_the_limits_it_does_not_honour() {
        let s = Setup::new(|_| {});
        // Bulk has no timeout: the dead site goes, or the run never ends.
        let sites = std::fs::read_to_string(s.path("sites.toml")).unwrap();
        let (live, _dead) = sites.split_once("[[site]]\nname = \"dead\"").expect("the setup's dead site");
        let limited = live.replace("slots = 16\n", "slots = 16\nmax_idle = 3\ninitial_window = 4\n");
        std::fs::write(s.path("sites.toml"), limited).unwrap();
        let out = s.submit(4, &["--policy", "bulk"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{err}");
        assert!(err.contains("site `slow`: policy `bulk` does not honour max_idle"), "{err}");
        assert!(err.contains("site `slow`: policy `bulk` does not honour initial_window"), "{err}");
        s.assert_each_job_ran_once(4, "bulk");
    }

    #[test]
    fn bad_inputs_exit_2_and_never_call_condor_submit() {
        let s = Setup::new(|_| {});
        std::fs::write(s.path("bad-sites.toml"), "[[site]]\nname = \"a\"\ngrid_resourse = \"condor x y\"\n")
            .unwrap();
        std::fs::write(s.path("bad-job.sub"), "executable = missing.sh\nqueue\n").unwrap();
        // A state directory that is a file cannot record the run: nothing is
        // submitted, so it is the user's to fix, as the others are.
        std::fs::write(s.path("a-file"), "").unwrap();
        let cases: [&[&str]; 5] = [
            &["submit", "5", "bad-sites.toml", "job.sub", "--state-dir", "state"],
            &["submit", "5", "sites.toml", "bad-job.sub", "--state-dir", "state"],
            &["submit", "0", "sites.toml", "job.sub", "--state-dir", "state"],
            &["submit", "5", "sites.toml", "job.sub", "--state-dir", "state", "--policy", "nonesuch"],
            &["submit", "5", "sites.toml", "job.sub", "--state-dir", "a-file"],
        ];
        for args in cases {
            let out = s.run(args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: stderr:\n{}", text(&out.stderr));
            assert!(!text(&out.stderr).trim().is_empty(), "{args:?}: a message says what is wrong");
        }
        let out = s.run(&["submit", "5", "bad-sites.toml", "job.sub"]);
        assert!(text(&out.stderr).contains("bad-sites.toml:3:1"), "file:line:col: {}", text(&out.stderr));
        assert_eq!(s.submit_calls(), 0, "no condor_submit may run for bad input");
        assert!(fake_condor::history(&s.pool).is_empty());
    }

    #[test]
    fn transient_submit_failures_are_retried_and_the_run_finishes() {
        let s = Setup::new(|c| c.submit_transient_fail = 0.3);
        let n = 24;
        let out = s.submit(n, &[]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
        s.assert_each_job_ran_once(n, "30% transient submit failures");
        assert!(s.submit_calls() > 1);
    }

    /// A schedd that never answers: the same batch file is retried (one file
    /// and one recorded intent per batch, nothing counted as queued), and
    /// after `unreachable_timeout` the run stops with exit 1 and the resume
    /// hint; the intents stay unknown for `--resume` to settle.
    #[test]
    fn a_schedd_that_never_answers_stops_the_run_resumably_with_one_file_per_batch() {
        let s = Setup::new(|c| c.submit_transient_fail = 1.0);
        let sites = std::fs::read_to_string(s.path("sites.toml")).unwrap();
        let sites = sites.replace("[condor]\n", "[condor]\nunreachable_timeout = 4\n");
        std::fs::write(s.path("sites.toml"), sites).unwrap();
        let out = s.submit(12, &[]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
        assert!(err.contains("does not answer") && err.contains("unreachable_timeout"), "{err}");
        assert!(err.contains("cosched submit --resume"), "{err}");
        assert!(s.submit_calls() >= 2, "retried: {}", s.submit_calls());
        let run_dir = std::fs::read_dir(s.path("state/runs")).unwrap().next().unwrap().unwrap().path();
        let files: Vec<String> = std::fs::read_dir(&run_dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sub"))
            .collect();
        let db = rusqlite::Connection::open(s.path("state/state.db")).unwrap();
        let intents: usize = db
            .query_row("SELECT COUNT(*) FROM submissions WHERE state = 'intent'", [], |r| r.get(0))
            .unwrap();
        let all: usize = db.query_row("SELECT COUNT(*) FROM submissions", [], |r| r.get(0)).unwrap();
        assert_eq!(files.len(), all, "one submit file per batch: {files:?}");
        assert!(
            all <= 3 && intents == all,
            "one pending batch per site, still unknown: {all} batches, {intents} intents"
        );
        assert!(fake_condor::history(&s.pool).is_empty(), "nothing was queued");
    }

    #[test]
    fn a_permanent_submit_failure_stops_the_run_and_shows_condor_submit_s_stderr() {
        let reason = "Can't access executable job.sh: permission denied (test)";
        let s = Setup::new(|c| c.submit_permanent_error = Some(reason.into()));
        let out = s.submit(10, &[]);
        assert_eq!(out.status.code(), Some(1), "stderr:\n{}", text(&out.stderr));
        let stderr = text(&out.stderr);
        assert!(stderr.contains(reason), "the real stderr is shown:\n{stderr}");
        assert!(stderr.contains("--resume"), "says how to continue:\n{stderr}");
        assert_eq!(s.left_in_queue(), 0);
    }

    /// How a cosched process of the kill test ended on its own.
    #[derive(Debug, PartialEq)]
    enum Ended {
        /// The run is finished: this process finished it (exit 0), or an
        /// earlier one did and was killed before it exited (`--resume` then
        /// says the run is done).
        Finished,
        /// `--resume` found no run: the kill came before the run was
        /// recorded, so nothing was submitted and the run starts afresh.
        NothingRecorded,
    }

    /// What cosched says, and the only things it may say, when it ends on
    /// its own in the kill test; anything else fails the test.
    fn ended(out: &Output, context: &str) -> Ended {
        let stderr = text(&out.stderr);
        match out.status.code() {
            Some(0) => Ended::Finished,
            Some(2) if stderr.contains("nothing to resume") && stderr.contains("is done") => Ended::Finished,
            Some(2) if stderr.contains("nothing to resume: no run was recorded") => Ended::NothingRecorded,
            // Killed before it even created the state directory.
            Some(2) if stderr.contains("no state database (state.db) here") => Ended::NothingRecorded,
            code => panic!("{context}: cosched exited with {code:?}:\n{stderr}"),
        }
    }

    /// Descriptors of process `pid` open on files under `dir`: how many,
    /// and those without close-on-exec, which every child it starts would
    /// inherit (a child holding the state directory's lock would keep it
    /// locked after a kill -9).
    fn fds_under(pid: u32, dir: &Path) -> (usize, Vec<String>) {
        const O_CLOEXEC: u32 = 0o2_000_000;
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return (0, Vec::new()) };
        let mut open = 0;
        let mut found = Vec::new();
        for fd in fds.filter_map(Result::ok) {
            let Ok(target) = std::fs::read_link(fd.path()) else { continue };
            if !target.starts_with(&dir) {
                continue;
            }
            open += 1;
            let info =
                std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy()));
            let flags = info.ok().and_then(|i| {
                i.lines()
                    .find_map(|l| l.strip_prefix("flags:"))
                    .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
            });
            if flags.is_some_and(|f| f & O_CLOEXEC == 0) {
                found.push(target.display().to_string());
            }
        }
        (open, found)
    }

    #[test]
    fn kill_9_at_random_moments_then_resume_loses_and_duplicates_nothing() {
        kill_9_at_random_moments_then_resume(None);
    }

    /// The same with a checkpoint every 50 ms: resumes start from the last
    /// checkpoint (of this launch or an earlier one) and replay the rest.
    #[test]
    fn kill_9_then_resume_from_checkpoints_loses_and_duplicates_nothing() {
        let from_checkpoint = kill_9_at_random_moments_then_resume(Some(0.05));
        assert!(from_checkpoint > 0, "no resume started from a checkpoint");
    }

    /// Kills cosched at random moments and resumes it until the run ends;
    /// returns how many resumes started from a checkpoint.
    fn kill_9_at_random_moments_then_resume(checkpoint_every: Option<f64>) -> usize {
        #[allow(clippy::disallowed_methods)] // a fresh seed per run, printed; COSCHED_TEST_SEED repeats one
        let seed =
            std::env::var("COSCHED_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
                    | 1
            });
        eprintln!("kill -9 test seed: {seed} (rerun with COSCHED_TEST_SEED={seed})");
        let mut rng = util::Rng(seed);
        // A slow condor_submit widens the window between queueing and
        // answering, where a crash leaves a batch cosched never heard of.
        // 60 jobs of 250 simulated seconds keep the run going for a few
        // seconds, longer than the kills take (KILLS × 170 ms on average),
        // so the kills land while jobs are being submitted, run and end.
        let s = Setup::new(|c| {
            c.submit_delay = 0.05;
            c.submit_transient_fail = 0.1;
            c.base_runtime = 250.0;
        });
        if let Some(every) = checkpoint_every {
            let sites = std::fs::read_to_string(s.path("sites.toml")).unwrap();
            std::fs::write(s.path("sites.toml"), format!("{sites}\n[run]\ncheckpoint_every = {every}\n"))
                .unwrap();
        }
        let mut from_checkpoint = 0;
        let mut count_checkpoint = |stderr: &[u8]| {
            if text(stderr).contains("from its checkpoint") {
                from_checkpoint += 1;
            }
            assert!(!text(stderr).contains("not using the checkpoint"), "seed {seed}: {}", text(stderr));
        };
        const KILLS: usize = 12;
        let n = 60;
        let fresh: Vec<String> = ["submit", "60", "sites.toml", "job.sub", "--state-dir", "state", "--json"]
            .map(String::from)
            .to_vec();
        let resume: Vec<String> = ["submit", "--resume", "state", "--json"].map(String::from).to_vec();
        let assert_nothing_submitted = |context: &str| {
            assert_eq!(
                s.submit_calls(),
                0,
                "seed {seed}: {context}: no run was recorded, yet condor_submit ran"
            );
            assert!(
                fake_condor::history(&s.pool).is_empty(),
                "seed {seed}: {context}: jobs without a recorded run"
            );
        };
        let mut args = fresh.clone();
        let mut kills = 0;
        let mut fds_checked = 0;
        let mut finished = false;
        #[allow(clippy::disallowed_methods)] // reported, not asserted: how long the kills and the run took
        let started = Instant::now();
        // Every launch either is killed or ends the run, except those that
        // find nothing recorded (at most one per kill before the recording).
        for launch in 0..2 * KILLS + 2 {
            if kills == KILLS || finished {
                break;
            }
            let context = format!("seed {seed} launch {launch} ({})", args[1]);
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let mut child = s.spawn(&refs);
            let delay = Duration::from_millis(20 + rng.below(300));
            std::thread::sleep(delay);
            if child.try_wait().expect("try_wait").is_none() {
                let (open, leaks) = fds_under(child.id(), &s.path("state"));
                fds_checked += open;
                // SIGKILL: no handler runs, exactly like a crash.
                child.kill().expect("kill -9");
                count_checkpoint(&child.wait_with_output().expect("killed").stderr);
                assert!(leaks.is_empty(), "{context}: descriptors a child would inherit: {leaks:?}");
                kills += 1;
                eprintln!("{context}: kill {kills} after {delay:?}");
                args = resume.clone();
                continue;
            }
            let out = child.wait_with_output().unwrap();
            count_checkpoint(&out.stderr);
            match ended(&out, &context) {
                Ended::Finished => finished = true,
                Ended::NothingRecorded => {
                    assert_nothing_submitted(&context);
                    args = fresh.clone();
                }
            }
        }
        assert!(kills == KILLS || finished, "seed {seed}: the launches ran out after {kills} kill(s)");
        // To the end: a resume, or a fresh start if no run was ever recorded.
        for attempt in 0..2 {
            if finished {
                break;
            }
            let context = format!("seed {seed} final {} ({attempt})", args[1]);
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = s.run(&refs);
            count_checkpoint(&out.stderr);
            match ended(&out, &context) {
                Ended::Finished => {
                    if out.status.code() == Some(0) {
                        let sum = summary(&out);
                        assert_eq!(sum["done"], n, "{context}: {sum}");
                        assert_eq!(sum["failed"], 0, "{context}: {sum}");
                    }
                    finished = true;
                }
                Ended::NothingRecorded => {
                    assert_nothing_submitted(&context);
                    args = fresh.clone();
                }
            }
        }
        assert!(finished, "seed {seed}: a fresh run after nothing was recorded did not finish");
        eprintln!(
            "seed {seed}: {kills} kill(s) ({fds_checked} descriptors into the state directory checked for \
             close-on-exec), then the run finished after {:?}",
            started.elapsed()
        );
        s.assert_each_job_ran_once(n, &format!("seed {seed}"));
        assert_eq!(s.left_in_queue(), 0, "seed {seed}: nothing may be left at the sites");
        let again = s.run(&["submit", "--resume", "state"]);
        assert_eq!(again.status.code(), Some(2), "seed {seed}: a finished run has nothing to resume");
        assert!(text(&again.stderr).contains("is done"), "seed {seed}: {}", text(&again.stderr));
        eprintln!("seed {seed}: {from_checkpoint} resume(s) started from a checkpoint");
        from_checkpoint
    }

    /// A cosched started as a shell job is: the leader of a process group
    /// of its own, which a terminal's Ctrl-C signals as a whole. Its stderr
    /// is read as it comes, line by line (a full pipe would stall it).
    struct ShellJob {
        child: Child,
        lines: std::sync::mpsc::Receiver<String>,
        stderr: Vec<String>,
    }

    impl ShellJob {
        fn start(s: &Setup, args: &[&str], log_level: &str) -> ShellJob {
            use std::io::BufRead;
            use std::os::unix::process::CommandExt;
            let mut child = s
                .command(args)
                .env("COSCHED_LOG", log_level)
                .stdout(Stdio::null())
                .process_group(0)
                .spawn()
                .expect("cosched starts");
            let stderr = child.stderr.take().expect("piped stderr");
            let (tx, lines) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            ShellJob { child, lines, stderr: Vec::new() }
        }

        /// Ctrl-C at the terminal: SIGINT to the whole foreground group.
        fn ctrl_c(&self) {
            // SAFETY: kill(2) on the process group our own child leads.
            let sent = unsafe { libc::kill(-(self.child.id() as libc::pid_t), libc::SIGINT) };
            assert_eq!(sent, 0, "SIGINT to the group: {}", std::io::Error::last_os_error());
        }

        /// Waits (at most `patience`) for a line of stderr that contains
        /// `needle`; false when none came.
        #[allow(clippy::disallowed_methods)] // real processes get real-time patience
        fn wait_for_line(&mut self, needle: &str, patience: Duration) -> bool {
            let deadline = Instant::now() + patience;
            while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                match self.lines.recv_timeout(left) {
                    Ok(line) => {
                        let found = line.contains(needle);
                        self.stderr.push(line);
                        if found {
                            return true;
                        }
                    }
                    Err(_) => return false,
                }
            }
            false
        }

        /// Waits (at most `patience`) for cosched to exit: its exit code and
        /// its whole stderr. Past the patience it is killed and the test fails.
        #[allow(clippy::disallowed_methods)] // real processes get real-time patience
        fn exit(mut self, patience: Duration, context: &str) -> (Option<i32>, String) {
            let deadline = Instant::now() + patience;
            let status = loop {
                if let Some(status) = self.child.try_wait().expect("waiting for cosched") {
                    break status;
                }
                if Instant::now() > deadline {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    self.stderr.extend(self.lines.try_iter());
                    panic!(
                        "{context}: cosched did not exit within {patience:?}; stderr:\n{}",
                        self.stderr.join("\n")
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            // The reader ends at the pipe's end, which came with the exit.
            self.stderr.extend(self.lines.iter());
            (status.code(), self.stderr.join("\n"))
        }
    }

    /// The first batch the pool has queued, once it has queued one (its
    /// `condor_submit` then sleeps `submit_delay` before it answers).
    #[allow(clippy::disallowed_methods)] // real processes get real-time patience
    fn first_queued_batch(s: &Setup) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(batch) = fake_condor::history(&s.pool).into_iter().find_map(|r| r.batch) {
                return batch;
            }
            assert!(Instant::now() < deadline, "no batch was queued within {PATIENCE:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The recorded state of `batch`: `intent`, `submitted` or `failed`.
    fn batch_state(s: &Setup, batch: &str) -> String {
        let db = rusqlite::Connection::open(s.path("state/state.db")).unwrap();
        db.query_row("SELECT state FROM submissions WHERE batch = ?1", [batch], |r| r.get(0))
            .unwrap_or_else(|e| panic!("batch {batch} in the state database: {e}"))
    }

    /// Every recorded batch's state, with how many batches are in it.
    fn batch_states(s: &Setup) -> BTreeMap<String, usize> {
        let db = rusqlite::Connection::open(s.path("state/state.db")).unwrap();
        let mut query = db.prepare("SELECT state, COUNT(*) FROM submissions GROUP BY state").unwrap();
        let rows = query.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.map(Result::unwrap).collect()
    }

    /// The pool's `condor_submit` takes `seconds` after queueing from now on.
    fn set_submit_delay(s: &Setup, seconds: f64) {
        let pool_toml = std::fs::read_to_string(s.pool.join("pool.toml")).unwrap();
        let mut config: PoolConfig = toml::from_str(&pool_toml).unwrap();
        config.submit_delay = seconds;
        fake_condor::install_with_exe(&s.pool, &config, &util::cosched_bin()).unwrap();
    }

    /// The tester's report: Ctrl-C in the terminal during `cosched submit`
    /// also killed the `condor_submit` in flight, in cosched's process
    /// group ("failed (no exit status) [transient]; retrying the same batch
    /// in 2 s" after "stopping", and the resume found the batch "never
    /// submitted"). The HTCondor commands are in process groups of their
    /// own: the batch in flight is committed and recorded, and the resume
    /// has nothing to settle.
    #[test]
    fn ctrl_c_in_a_terminal_lets_the_condor_submit_in_flight_finish() {
        let s = Setup::new(|c| c.submit_delay = 3.0);
        let n = 12;
        // At info level: a condor_submit killed after its commit is found
        // again with condor_q, and says so only there.
        let mut job = ShellJob::start(
            &s,
            &["submit", "12", "sites.toml", "job.sub", "--state-dir", "state", "--json"],
            "info",
        );
        let batch = first_queued_batch(&s);
        assert_eq!(batch_state(&s, &batch), "intent", "batch {batch} is in flight: queued, not answered yet");
        job.ctrl_c();
        assert!(
            job.wait_for_line("Ctrl-C again stops at once", PATIENCE),
            "the first Ctrl-C says how to stop at once:\n{}",
            job.stderr.join("\n")
        );
        let (code, stderr) = job.exit(PATIENCE, "after Ctrl-C");
        assert_eq!(code, Some(3), "Ctrl-C exits 3 (interrupted); stderr:\n{stderr}");
        assert!(!stderr.contains("no exit status"), "a condor_submit was killed by the Ctrl-C:\n{stderr}");
        assert!(!stderr.contains("retrying"), "nothing is retried once the run stops:\n{stderr}");
        assert_eq!(
            batch_state(&s, &batch),
            "submitted",
            "the batch in flight is recorded; stderr:\n{stderr}"
        );
        let states = batch_states(&s);
        assert_eq!(states.keys().collect::<Vec<_>>(), ["submitted"], "every batch answered: {states:?}");

        set_submit_delay(&s, 0.0);
        let out = s.run(&["submit", "--resume", "state", "--json"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{err}");
        assert!(!err.contains("cosched: batch "), "the resume had no batch to settle:\n{err}");
        assert_eq!(summary(&out)["done"], n, "{}", summary(&out));
        s.assert_each_job_ran_once(n, "Ctrl-C, then --resume");
        assert_eq!(s.left_in_queue(), 0, "nothing may be left at the sites");
    }

    /// A schedd that hangs in `condor_submit` must not hold the person at
    /// the terminal: the first Ctrl-C waits for the command in flight, the
    /// second exits at once (3, as interrupted), the command dying with
    /// cosched, and the resume settles its batch from the log or condor_q.
    #[test]
    fn a_second_ctrl_c_stops_at_once_and_the_resume_settles_the_batch_in_flight() {
        let s = Setup::new(|c| c.submit_delay = 600.0);
        let sites = std::fs::read_to_string(s.path("sites.toml")).unwrap();
        std::fs::write(
            s.path("sites.toml"),
            sites.replace("submit_timeout = 20\n", "submit_timeout = 900\n"),
        )
        .unwrap();
        let n = 12;
        let mut job = ShellJob::start(
            &s,
            &["submit", "12", "sites.toml", "job.sub", "--state-dir", "state", "--json"],
            "warn",
        );
        let batch = first_queued_batch(&s);
        job.ctrl_c();
        assert!(
            job.wait_for_line("Ctrl-C again stops at once", PATIENCE),
            "the first Ctrl-C was heard:\n{}",
            job.stderr.join("\n")
        );
        job.ctrl_c();
        // 600 s of condor_submit left: 60 s is "at once".
        let (code, stderr) = job.exit(PATIENCE, "after a second Ctrl-C");
        assert_eq!(code, Some(3), "stderr:\n{stderr}");
        assert!(
            stderr.contains("stopping at once") && stderr.contains("cosched submit --resume"),
            "says what becomes of the batch in flight:\n{stderr}"
        );
        assert_eq!(batch_state(&s, &batch), "intent", "its outcome is left to the resume");

        set_submit_delay(&s, 0.0);
        let out = s.run(&["submit", "--resume", "state", "--json"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{err}");
        assert!(
            err.contains(&format!("cosched: batch {batch}: submitted as cluster")),
            "the resume found the batch queued before the exit:\n{err}"
        );
        assert_eq!(summary(&out)["done"], n, "{}", summary(&out));
        s.assert_each_job_ran_once(n, "two Ctrl-C, then --resume");
        assert_eq!(s.left_in_queue(), 0, "nothing may be left at the sites");
    }

    /// Crash point 0 of `crate::run::drive`: a cosched killed before it recorded
    /// its run leaves a state directory without one (with or without the
    /// database); `--resume` says nothing was submitted, and `submit` starts
    /// the run there.
    #[test]
    fn resume_where_no_run_was_recorded_says_so_and_a_fresh_submit_works() {
        let s = Setup::new(|_| {});
        let state = s.path("state");
        std::fs::create_dir_all(state.join("runs")).unwrap();
        std::fs::write(state.join("lock"), "").unwrap();
        for stage in ["before the database", "with an empty database"] {
            let out = s.run(&["submit", "--resume", "state"]);
            assert_eq!(out.status.code(), Some(2), "{stage}: {}", text(&out.stderr));
            assert!(
                text(&out.stderr)
                    .contains("nothing to resume: no run was recorded here, so nothing was submitted"),
                "{stage}: {}",
                text(&out.stderr)
            );
            cosched::state::Db::open(&state.join("state.db")).expect("an empty database");
        }
        let out = s.run(&["submit", "--resume", "no-such-dir"]);
        assert!(text(&out.stderr).contains("no state database"), "{}", text(&out.stderr));
        assert_eq!(s.submit_calls(), 0);
        let out = s.submit(6, &[]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
        s.assert_each_job_ran_once(6, "a fresh run in the directory");
    }

    #[test]
    fn a_finished_run_leaves_capacity_memory_and_a_second_run_in_the_same_state_dir_works() {
        let s = Setup::new(|_| {});
        let out = s.submit(12, &[]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
        assert!(!memory(&s.path("memory.db")).is_empty(), "site memory was stored");
        let out = s.submit(12, &[]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
    }

    /// The first window adaptive gave site `site` in the one run recorded
    /// in `state_dir`.
    fn first_window(state_dir: &Path, site: u32) -> f64 {
        let runs: Vec<PathBuf> =
            std::fs::read_dir(state_dir.join("runs")).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(runs.len(), 1, "{runs:?}");
        cosched::run::decisions::read(&runs[0])
            .into_iter()
            .find_map(|d| match d.kind {
                DecisionKind::Window { window, .. } if d.site == SiteId(site) => Some(window),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{}: no window decision for site #{site}", runs[0].display()))
    }

    /// Issue 55, item 4: memory follows the job, not the directory. The same
    /// job (its description copied to another directory) starts at the knee
    /// the first run learned; another job (another executable) at the same
    /// site starts cold, as a kind new there.
    #[test]
    fn the_same_job_from_another_directory_starts_warm_and_another_job_does_not_inherit_the_knee() {
        let s = knee_setup("adaptive");
        const FIRST: f64 = 16.0;
        let sites = std::fs::read_to_string(s.path("sites.toml")).unwrap();
        let sites = sites.replace("initial_window = 4", &format!("initial_window = {FIRST}"));
        assert!(sites.contains("initial_window = 16"), "{sites}");
        std::fs::write(s.path("sites.toml"), sites).unwrap();
        let job = std::fs::read_to_string(s.path("job.sub")).unwrap();
        // The same program named from another directory is the same job; a
        // copy of it is another program, as another executable is.
        for (dir, exe) in [("first", "job.sh"), ("again", "../first/job.sh"), ("other", "other.sh")] {
            std::fs::create_dir(s.path(dir)).unwrap();
            if !exe.contains('/') {
                std::fs::copy(s.path("job.sh"), s.path(dir).join(exe)).unwrap();
            }
            std::fs::write(s.path(dir).join("job.sub"), job.replace("job.sh", exe)).unwrap();
        }
        let run = |dir: &str, n: u64| {
            let (job, state) = (format!("{dir}/job.sub"), format!("{dir}/state"));
            let n = n.to_string();
            let out = s.run(&["submit", &n, "sites.toml", &job, "--state-dir", &state, "--json"]);
            assert_eq!(out.status.code(), Some(0), "{dir}: stderr:\n{}", text(&out.stderr));
            first_window(&s.path(&state), 1)
        };
        let knee_memory = || {
            let m = memory(&s.path("memory.db"));
            m.of_site("knee").map(|(k, m)| (k.to_string(), m.clone())).collect::<Vec<_>>()
        };

        assert_eq!(run("first", 120), FIRST, "a cold start begins at the first window");
        let learned = knee_memory();
        assert_eq!(learned.len(), 1, "one kind learned at the knee: {learned:?}");
        let capacity = learned[0].1.capacity.expect("a capacity learned at the knee");
        assert!(capacity < FIRST, "the knee of 4 was found below the first window: {learned:?}");

        // A warm start: at the capacity learned, or one probe step above it.
        let again = run("again", 40);
        assert!(
            again < FIRST && (capacity..=2.0 * capacity).contains(&again),
            "the same job from another directory starts at {again}, having learned {capacity}"
        );

        assert_eq!(run("other", 40), FIRST, "another job does not start at the first job's knee");
        let kinds: Vec<String> = knee_memory().into_iter().map(|(k, _)| k).collect();
        assert_eq!(kinds.len(), 2, "each job's memory is its own: {kinds:?}");
        assert!(kinds.contains(&learned[0].0), "{kinds:?}");
    }

    #[test]
    fn no_memory_keeps_nothing_and_memory_names_the_file_kept() {
        let s = Setup::new(|_| {});
        let out = s.run(&["submit", "6", "sites.toml", "job.sub", "--state-dir", "cold", "--no-memory"]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
        assert!(!s.path("memory.db").exists(), "--no-memory wrote the user's memory");
        let out =
            s.run(&["submit", "6", "sites.toml", "job.sub", "--state-dir", "named", "--memory", "m/x.db"]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
        assert!(!s.path("memory.db").exists(), "--memory PATH wrote the user's memory");
        let kept = memory(&s.path("m/x.db"));
        let sites: Vec<&str> = kept.iter().map(|(site, _, _)| site).collect();
        assert_eq!(sites, ["dead", "good", "slow"], "{kept:?}");
    }

    /// `--resume` dropped `--memory PATH`: what the run learned after the
    /// resume went to the default memory, silently. A resumed run keeps
    /// the memory it was started with, and another given beside `--resume`
    /// is refused, naming the run's.
    #[test]
    fn a_resumed_run_keeps_the_memory_it_was_started_with_and_refuses_another() {
        let s = stopped_two_kinds(&["--memory", "mm.db"]);
        for other in [&["--memory", "other.db"][..], &["--no-memory"]] {
            let mut args = vec!["submit", "--resume", "state"];
            args.extend(other);
            let out = s.run(&args);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{other:?}: {err}");
            assert!(err.contains("mm.db") && err.contains("keeps one memory"), "{other:?}: {err}");
        }
        assert!(!s.path("other.db").exists(), "a refused resume made the memory it was given");
        schedd_answers_again(&s);
        let out = s.run(&["submit", "--resume", "state", "--json"]);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
        assert_two_kinds_ran(&s, "resumed");
        assert!(!memory(&s.path("mm.db")).is_empty(), "what the resumed run learned went to its --memory");
        assert!(
            !s.path("memory.db").exists(),
            "the resumed run wrote the memory the resume's environment names ($COSCHED_MEMORY)"
        );
    }

    /// `--resume` re-read an edited submit description: the batches after
    /// it ran the new text, and what the run learned was kept under the new
    /// fingerprint. A resumed run submits the text it started with, says
    /// once that the file changed, and keeps what it learns under the
    /// fingerprint of what it ran. It resumes here from another directory:
    /// the description's relative executable is still its directory's.
    #[test]
    fn a_resumed_run_submits_its_descriptions_as_it_started_and_says_one_was_edited() {
        let s = stopped_two_kinds(&[]);
        let io = std::fs::read_to_string(s.path("io.sub")).unwrap();
        let edited = io.replace("arguments = from-io", "arguments = edited-io");
        assert_ne!(edited, io, "the edit changes io.sub: {io}");
        std::fs::write(s.path("io.sub"), &edited).unwrap();
        let key = |text: &str| {
            let desc = cosched::submit_desc::parse(&s.path("io.sub"), text).expect("io.sub parses");
            cosched::submit_desc::kind_key(&desc)
        };
        assert_ne!(key(&io), key(&edited), "the edit is another job to the memory");
        schedd_answers_again(&s);
        std::fs::create_dir(s.path("elsewhere")).unwrap();
        let out = wait_bounded(
            s.command(&["submit", "--resume", "../state", "--json"])
                .current_dir(s.path("elsewhere"))
                .spawn()
                .expect("cosched starts"),
            PATIENCE,
            &["submit", "--resume"],
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{err}");
        // Every io job ran `from-io …`, the text the run started with.
        assert_two_kinds_ran(&s, "resumed after an edit");
        let said: Vec<&str> = err.lines().filter(|l| l.contains("changed since")).collect();
        assert_eq!(said.len(), 1, "the edit is said once: {err}");
        assert!(
            said[0].contains("io.sub") && said[0].contains("goes on with the text it started with"),
            "naming the file and what the run does: {err}"
        );
        let learned: Vec<String> =
            memory(&s.path("memory.db")).iter().map(|(_, k, _)| k.to_string()).collect();
        assert!(learned.contains(&key(&io)), "kept under the run's io key {}: {learned:?}", key(&io));
        assert!(!learned.contains(&key(&edited)), "kept under the edited text's key: {learned:?}");
    }

    /// A second run on a busy state directory waited in silence, and the
    /// wait was counted in its makespan. It says at once who holds the
    /// directory and that it waits, and its clock (its epoch: the makespan,
    /// the elapsed time and the report's start) starts once the lock is
    /// its own. On `--simulate`, where cosched sets the clock (a pool named
    /// by COSCHED_FAKE_POOL has its own).
    #[test]
    fn a_run_waiting_for_a_busy_state_directory_says_so_and_its_clock_starts_after() {
        use std::os::fd::AsRawFd;
        let s = Setup::new(|_| {});
        let sim = "[simulate]\nbase_runtime = 60\njitter = 0\n\n\
                   [[site]]\nname = \"a\"\nslots = 8\n[site.simulate]\ncapacity = 8\n";
        std::fs::write(s.path("sim.toml"), sim).unwrap();
        std::fs::create_dir_all(s.path("state")).unwrap();
        let lock = std::fs::File::create(s.path("state/lock")).unwrap();
        // SAFETY: flock(2) on a descriptor this test owns.
        let taken = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(taken, 0, "the test holds the lock: {}", std::io::Error::last_os_error());
        let args =
            ["submit", "6", "sim.toml", "job.sub", "--simulate", "--speedup", "1000", "--state-dir", "state"];
        let mut job = ShellJob::start(&s, &args, "warn");
        assert!(job.wait_for_line("waiting up to", PATIENCE), "no word of the wait: {:?}", job.stderr);
        let said = job.stderr.last().cloned().unwrap_or_default();
        assert!(said.contains(&format!("pid {}:", std::process::id())), "names the holder: {said}");
        let released = cosched::engine::wall_clock_unix();
        drop(lock);
        let (code, stderr) = job.exit(PATIENCE, "once the lock is free");
        assert_eq!(code, Some(0), "{stderr}");
        let db = cosched::state::Db::open(&s.path("state/state.db")).unwrap();
        let runs = db.runs().unwrap();
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert!(
            runs[0].epoch_unix >= released,
            "the run's clock started {:.3} s before it had the state directory",
            released - runs[0].epoch_unix
        );
    }

    /// What the memory database at `path` holds.
    fn memory(path: &Path) -> cosched::policy::CapacityMemory {
        let db = cosched::state::MemoryDb::open(path).expect("the memory database opens");
        db.load().expect("memory loads")
    }
}

/// The fake HTCondor (`src/fake_condor/`) against the real HTCondor 25 outputs in
/// `shared/fixtures`: command outputs and exit codes byte for byte, user logs
/// that `cosched log dump` reads into the event sequences HTCondor writes,
/// dead sites, holds, removal, and a schedd killed mid-run. Each test gets its
/// own pool at a high speedup; waiting is bounded polling, never a sleep
/// standing in for synchronisation.
mod fake {
    use crate::util;
    use cosched::fake_condor::{self, FakeSite, HistoryStatus, PoolConfig};
    use cosched::sim::SiteParams;
    use serde_json::Value;
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::process::{Command, Output};
    use std::time::Duration;

    const LIVE: &str = "condor ce1.example ce1.example:9619";
    const DEAD: &str = "condor dead.example dead.example:9619";
    const HOLDS: &str = "condor holds.example holds.example:9619";

    fn params(slots: u32) -> SiteParams {
        SiteParams::healthy("", slots)
    }

    /// A pool with a live, a dead and an always-holding grid site and a local
    /// site, 1000 simulated seconds per real second, 20 s jobs.
    struct Pool {
        dir: tempfile::TempDir,
        pool: PathBuf,
        bin: PathBuf,
    }

    impl Pool {
        fn new(tweak: impl FnOnce(&mut PoolConfig)) -> Pool {
            let dir = util::tempdir();
            let pool = dir.path().join("pool");
            let mut holds = FakeSite::grid(HOLDS, params(4));
            holds.hold_probability = 1.0;
            let mut config = PoolConfig {
                speedup: 1000.0,
                base_runtime: 20.0,
                jitter: 0.2,
                seed: 3,
                sites: vec![
                    FakeSite::grid(LIVE, params(4)),
                    FakeSite::grid(DEAD, SiteParams { dead: true, ..params(4) }),
                    holds,
                ],
                local: Some(FakeSite::grid("", params(4))),
                ..PoolConfig::default()
            };
            tweak(&mut config);
            let bin =
                fake_condor::install_with_exe(&pool, &config, &util::cosched_bin()).expect("pool installs");
            Pool { dir, pool, bin }
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        /// Runs a fake command by its symlinked HTCondor name.
        fn run(&self, name: &str, args: &[&str]) -> Output {
            Command::new(self.bin.join(name))
                .args(args)
                .current_dir(self.dir.path())
                .env(fake_condor::POOL_ENV, &self.pool)
                .output()
                .expect("fake command runs")
        }

        /// Writes `NAME.sub` and submits it; returns the output.
        fn submit(&self, name: &str, text: &str, terse: bool) -> Output {
            let file = format!("{name}.sub");
            std::fs::write(self.path(&file), text).unwrap();
            self.run(
                "condor_submit",
                &if terse { vec!["-terse", file.as_str()] } else { vec![file.as_str()] },
            )
        }

        /// A grid submit description for `jobs` (CoschedJob indexes) the way
        /// cosched renders one, logging to `log`.
        fn grid_sub(&self, resource: &str, log: &str, jobs: &[u64]) -> String {
            let list: String = jobs.iter().map(|j| format!("{j}\n")).collect();
            format!(
                "executable = /bin/sleep\narguments = 300\nuniverse = grid\ngrid_resource = {resource}\n\
                 log = {}\n+CoschedRun = \"run-1\"\n+CoschedBatch = \"b1\"\n+CoschedJob = $(CoschedJob)\n\
                 queue CoschedJob from (\n{list})\n",
                self.path(log).display()
            )
        }

        /// `condor_q -json ARGS`, parsed (an empty output is no ads).
        fn q(&self, args: &[&str]) -> Vec<Value> {
            let mut all = vec!["-json"];
            all.extend_from_slice(args);
            let out = self.run("condor_q", &all);
            assert_eq!(out.status.code(), Some(0), "condor_q {args:?}: {}", text(&out.stderr));
            let stdout = text(&out.stdout);
            if stdout.is_empty() {
                return Vec::new();
            }
            serde_json::from_str::<Vec<Value>>(&stdout)
                .unwrap_or_else(|e| panic!("condor_q -json: {e}\n{stdout}"))
        }

        /// The log's events as `cosched log dump` reads them.
        fn dump(&self, log: &str) -> Vec<Value> {
            let out = util::cosched(self.dir.path(), &["log", "dump", log]);
            assert_eq!(out.status.code(), Some(0), "cosched log dump {log}: {}", text(&out.stderr));
            text(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("dump line is JSON")).collect()
        }
    }

    impl Drop for Pool {
        fn drop(&mut self) {
            let _ = fake_condor::stop(&self.pool);
        }
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    /// (stdout, stderr, exit code) of a real HTCondor command in `fixtures/cli`.
    fn fixture(name: &str) -> (String, String, i32) {
        let dir = util::shared().join("fixtures/cli");
        let read =
            |ext: &str| std::fs::read_to_string(dir.join(format!("{name}.{ext}"))).expect("fixture exists");
        (read("stdout"), read("stderr"), read("rc").trim().parse().expect("rc is a number"))
    }

    fn assert_like_fixture(out: &Output, name: &str, from: &str, to: &str) {
        let (stdout, stderr, rc) = fixture(name);
        assert_eq!(text(&out.stdout), stdout.replace(from, to), "{name}: stdout");
        assert_eq!(text(&out.stderr), stderr.replace(from, to), "{name}: stderr");
        assert_eq!(out.status.code(), Some(rc), "{name}: exit code");
    }

    /// Polls `probe` up to 200 times, 50 ms apart (10 s in all).
    fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
        for _ in 0..200 {
            if let Some(v) = probe() {
                return v;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{what}: not within 10 s");
    }

    /// Event types per (cluster, proc), in log order.
    fn sequences(events: &[Value]) -> BTreeMap<(u64, u64), Vec<u64>> {
        let mut seq: BTreeMap<(u64, u64), Vec<u64>> = BTreeMap::new();
        for e in events {
            let id = (e["cluster"].as_u64().unwrap(), e["proc"].as_u64().unwrap());
            seq.entry(id).or_default().push(e["type"].as_u64().unwrap());
        }
        seq
    }

    fn count(events: &[Value], event_type: u64) -> usize {
        events.iter().filter(|e| e["type"] == event_type).count()
    }

    /// The fixture submit file with its log moved into `pool`'s directory.
    fn fixture_sub(pool: &Pool, name: &str) -> String {
        let sub = std::fs::read_to_string(util::shared().join(format!("fixtures/cli/{name}.sub"))).unwrap();
        sub.replace("/srv/condor/fixtures-work/cli/cli.log", &pool.path("cli.log").display().to_string())
    }

    #[test]
    fn submit_outputs_match_the_fixtures() {
        let p = Pool::new(|_| {});
        // Fresh pools count clusters from 1.
        let out = p.submit("plain", &fixture_sub(&p, "condor_submit-plain"), false);
        assert_like_fixture(&out, "condor_submit-plain", "54", "1");
        let out = p.submit("terse", &fixture_sub(&p, "condor_submit-terse"), true);
        assert_like_fixture(&out, "condor_submit-terse", "55", "2");
        // A rejected executable: no newline after "Submitting job(s)", the
        // error on stderr, exit 1, and the cluster id is used up.
        let out = p.submit("bad", &fixture_sub(&p, "condor_submit-bad-exe"), false);
        assert_like_fixture(&out, "condor_submit-bad-exe", "", "");
        let out = p.submit("after", &fixture_sub(&p, "condor_submit-terse"), true);
        assert_like_fixture(&out, "condor_submit-terse", "55", "4");
        // Vanilla jobs ran at the local site: every proc 000, 001, 005.
        let events = eventually("4 vanilla jobs end", || {
            let events = p.dump("cli.log");
            (count(&events, 5) == 6).then_some(events)
        });
        for (id, seq) in sequences(&events) {
            assert_eq!(seq, [0, 1, 5], "job {id:?}");
        }
        assert!(p.q(&[]).is_empty(), "finished jobs leave the queue");
    }

    #[test]
    fn grid_jobs_log_submit_grid_submit_execute_terminate_like_htcondor() {
        let p = Pool::new(|_| {});
        let jobs: Vec<u64> = (100..112).collect();
        let out = p.submit("grid", &p.grid_sub(LIVE, "grid.log", &jobs), true);
        assert_eq!(text(&out.stdout), "1.0 - 1.11\n", "stderr: {}", text(&out.stderr));
        let events = eventually("12 grid jobs end", || {
            let events = p.dump("grid.log");
            (count(&events, 5) == 12).then_some(events)
        });
        // condor_submit writes the 000s in string order of the job id.
        let order: Vec<String> = events
            .iter()
            .filter(|e| e["type"] == 0)
            .map(|e| e["proc"].as_u64().unwrap().to_string())
            .collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted);
        assert_eq!(order.len(), 12);
        for (id, seq) in sequences(&events) {
            assert_eq!(seq, [0, 27, 1, 5], "job {id:?}");
        }
        // Bodies carry what HTCondor's reader finds in the real grid log.
        let reference: Vec<Value> =
            std::fs::read_to_string(util::shared().join("fixtures/userlogs/grid-condorc.ref.jsonl"))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        let keys = |e: &Value| e["attrs"].as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        for event_type in [0, 27, 1, 5] {
            let want = keys(reference.iter().find(|e| e["type"] == event_type).unwrap());
            for e in events.iter().filter(|e| e["type"] == event_type) {
                assert_eq!(keys(e), want, "attributes of a {event_type:03} event");
            }
        }
        for e in &events {
            match e["type"].as_u64() {
                Some(27) => {
                    assert_eq!(e["attrs"]["GridResource"], LIVE);
                    assert!(e["attrs"]["GridJobId"].as_str().unwrap().starts_with(&format!("{LIVE} ")));
                }
                Some(1) => assert_eq!(e["attrs"]["ExecuteHost"], LIVE),
                Some(5) => assert_eq!(e["attrs"]["ReturnValue"], 0),
                _ => {}
            }
        }
        // The 005 text is HTCondor's, line for line.
        let log = std::fs::read_to_string(p.path("grid.log")).unwrap();
        let real =
            std::fs::read_to_string(util::shared().join("fixtures/userlogs/grid-condorc.log")).unwrap();
        let body = |log: &str, header: &str| -> String {
            let start = log.find(header).expect("a 005 event") + 1;
            let rest = &log[start..];
            let block = &rest[..rest.find("\n...\n").unwrap()];
            block.split_once('\n').unwrap().1.to_string()
        };
        assert_eq!(body(&log, "\n005 ("), body(&real, "\n005 (033.001.000)"));
        // Times follow the run: submit ≤ grid submit ≤ execute ≤ terminate.
        let mut last: BTreeMap<(u64, u64), String> = BTreeMap::new();
        for e in &events {
            let id = (e["cluster"].as_u64().unwrap(), e["proc"].as_u64().unwrap());
            let t = e["time"].as_str().unwrap().to_string();
            if let Some(before) = last.insert(id, t.clone()) {
                assert!(before <= t, "job {id:?}: {before} then {t}");
            }
        }
        // The permanent record: each job index succeeded once, with its attributes.
        let history = fake_condor::history(&p.pool);
        assert_eq!(history.len(), 12);
        assert!(history.iter().all(|r| r.status == HistoryStatus::Succeeded && r.site == LIVE));
        assert!(history
            .iter()
            .all(|r| r.run.as_deref() == Some("run-1") && r.batch.as_deref() == Some("b1")));
        let mut indexes: Vec<u64> = history.iter().map(|r| r.job.unwrap()).collect();
        indexes.sort();
        assert_eq!(indexes, jobs);
        assert!(p.q(&["1"]).is_empty(), "a finished cluster is not in condor_q");
    }

    #[test]
    fn condor_q_json_is_shaped_like_htcondor_s() {
        let p = Pool::new(|_| {});
        p.submit("a", &p.grid_sub(DEAD, "a.log", &[5, 6]), true);
        let out = p.run("condor_q", &["-json", "1"]);
        let stdout = text(&out.stdout);
        // Same framing as the real two-ad answer: `[`, `{`, `}`, `,`, `{`, `}`, `]`.
        let frame =
            |s: &str| s.lines().filter(|l| !l.starts_with("  ")).map(str::to_string).collect::<Vec<_>>();
        assert_eq!(frame(&stdout), frame(&fixture("condor_q-json-running").0));
        let ads: Vec<Value> = serde_json::from_str(&stdout).unwrap();
        assert_eq!(ads.len(), 2);
        // Keys sorted ignoring case, as HTCondor does (checked on the fixture too).
        let key_order = |s: &str| -> Vec<String> {
            s.lines()
                .filter_map(|l| l.strip_prefix("  \""))
                .map(|l| l.split('"').next().unwrap().to_string())
                .collect()
        };
        for sample in [stdout.clone(), fixture("condor_q-json-running").0] {
            let first_ad: Vec<String> = key_order(sample.split("\n}\n").next().unwrap());
            let mut sorted = first_ad.clone();
            sorted.sort_by_key(|k| k.to_lowercase());
            assert_eq!(first_ad, sorted);
        }
        for (proc, ad) in ads.iter().enumerate() {
            assert_eq!(ad["ClusterId"], 1);
            assert_eq!(ad["ProcId"], proc);
            assert_eq!(ad["JobStatus"], 1, "a dead site never starts jobs");
            assert_eq!(ad["GridResource"], DEAD);
            assert_eq!(ad["CoschedRun"], "run-1");
            assert_eq!(ad["CoschedBatch"], "b1");
            assert_eq!(ad["CoschedJob"], 5 + proc);
            assert_eq!(ad["JobUniverse"], 9);
            assert!(ad["QDate"].is_i64() && ad["Owner"].is_string());
        }
        let trimmed = p.q(&[
            "-constraint",
            "CoschedRun == \"run-1\" && CoschedJob == 6",
            "-attributes",
            "ClusterId,ProcId,JobStatus",
        ]);
        assert_eq!(trimmed.len(), 1);
        let keys: Vec<&String> = trimmed[0].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["ClusterId", "JobStatus", "ProcId"]);
        assert_eq!(trimmed[0]["ProcId"], 1);
        let out = p.run("condor_q", &["-json", "99999"]);
        assert_like_fixture(&out, "condor_q-json-nomatch", "", "");
    }

    #[test]
    fn condor_rm_outputs_match_the_fixtures_and_log_009() {
        let p = Pool::new(|_| {});
        for (name, jobs) in [("c1", &[0u64, 1][..]), ("c2", &[2][..]), ("c3", &[3, 4][..]), ("c4", &[5][..])]
        {
            let out = p.submit(name, &p.grid_sub(DEAD, "rm.log", jobs), true);
            assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        }
        assert_like_fixture(&p.run("condor_rm", &["1.1"]), "condor_rm-job", "54.1", "1.1");
        assert_like_fixture(&p.run("condor_rm", &["1"]), "condor_rm-cluster", "54", "1");
        assert_like_fixture(&p.run("condor_rm", &["99999"]), "condor_rm-nonexistent", "", "");
        assert_like_fixture(&p.run("condor_rm", &["99999.5"]), "condor_rm-nonexistent-job", "", "");
        assert_like_fixture(&p.run("condor_rm", &["2", "99999"]), "condor_rm-multi", "55", "2");
        // Removing what is already gone fails like an unknown cluster.
        assert_like_fixture(&p.run("condor_rm", &["1"]), "condor_rm-nonexistent", "99999", "1");
        let out = p.run("condor_rm", &["-constraint", "CoschedRun == \"run-1\" && CoschedJob == 3"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(p.q(&[]).iter().map(|ad| ad["CoschedJob"].as_u64().unwrap()).collect::<Vec<_>>(), [4, 5]);
        let events = p.dump("rm.log");
        let removed: Vec<(u64, u64)> = events
            .iter()
            .filter(|e| e["type"] == 9)
            .map(|e| (e["cluster"].as_u64().unwrap(), e["proc"].as_u64().unwrap()))
            .collect();
        assert_eq!(removed, [(1, 1), (1, 0), (2, 0), (3, 0)]);
        for e in events.iter().filter(|e| e["type"] == 9) {
            let reason = e["attrs"]["Reason"].as_str().unwrap();
            assert!(reason.starts_with("via condor_rm (by user "), "{reason}");
        }
        let history = fake_condor::history(&p.pool);
        assert_eq!(history.iter().filter(|r| r.status == HistoryStatus::Removed).count(), 4);
        assert!(p.q(&["1"]).is_empty() && p.q(&["2"]).is_empty());
    }

    #[test]
    fn a_dead_site_accepts_jobs_and_never_starts_them() {
        let p = Pool::new(|_| {});
        p.submit("dead", &p.grid_sub(DEAD, "dead.log", &[0, 1, 2]), true);
        p.submit("live", &p.grid_sub(LIVE, "live.log", &[3]), true);
        // Once a later job elsewhere has run to its end, the dead site has had
        // that much simulated time to start something.
        eventually("the live job ends", || (count(&p.dump("live.log"), 5) == 1).then_some(()));
        let seq = sequences(&p.dump("dead.log"));
        assert_eq!(seq.len(), 3);
        for (id, s) in seq {
            assert_eq!(s, [0, 27], "job {id:?} was accepted by the grid and never ran");
        }
        let ads = p.q(&["1"]);
        assert_eq!(ads.iter().map(|a| a["JobStatus"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 1, 1]);
    }

    #[test]
    fn a_held_attempt_logs_execute_then_hold_and_stays_until_removed() {
        let p = Pool::new(|_| {});
        p.submit("held", &p.grid_sub(HOLDS, "held.log", &[9]), true);
        let events = eventually("the hold", || {
            let events = p.dump("held.log");
            (count(&events, 12) == 1).then_some(events)
        });
        assert_eq!(sequences(&events)[&(1, 0)], [0, 27, 1, 12]);
        let real =
            std::fs::read_to_string(util::shared().join("fixtures/userlogs/grid-condorc.ref.jsonl")).unwrap();
        let real_hold: Value = real
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["type"] == 12)
            .unwrap();
        let hold = events.iter().find(|e| e["type"] == 12).unwrap();
        assert_eq!(hold["attrs"]["HoldReasonCode"], real_hold["attrs"]["HoldReasonCode"]);
        assert_eq!(hold["attrs"]["HoldReasonSubCode"], real_hold["attrs"]["HoldReasonSubCode"]);
        assert!(hold["attrs"]["HoldReason"].as_str().unwrap().starts_with("Error from slot"));
        let ads = p.q(&["1.0"]);
        assert_eq!(ads[0]["JobStatus"], 5);
        assert_eq!(fake_condor::history(&p.pool)[0].status, HistoryStatus::Held);
        assert_like_fixture(&p.run("condor_rm", &["1.0"]), "condor_rm-job", "54.1", "1.0");
        assert_eq!(sequences(&p.dump("held.log"))[&(1, 0)], [0, 27, 1, 12, 9]);
        assert_eq!(fake_condor::history(&p.pool)[0].status, HistoryStatus::Removed);
        assert!(p.q(&[]).is_empty());
    }

    #[test]
    fn a_killed_schedd_is_restarted_and_its_jobs_run_to_the_end_once() {
        // Long jobs (about 0.5 s each) on 2 slots, so the kill lands mid-run.
        let p = Pool::new(|c| {
            c.base_runtime = 500.0;
            c.sites[0].params.slots = 2;
        });
        p.submit("long", &p.grid_sub(LIVE, "long.log", &[0, 1, 2, 3]), true);
        eventually("a job starts", || (count(&p.dump("long.log"), 1) > 0).then_some(()));
        fake_condor::stop(&p.pool).expect("schedd stops");
        // Nothing moves without a schedd; any command notices queued jobs
        // without one and starts it.
        let ended_before = count(&p.dump("long.log"), 5);
        assert_eq!(p.q(&[]).len(), 4 - ended_before);
        let events = eventually("every job ends", || {
            let events = p.dump("long.log");
            (count(&events, 5) == 4).then_some(events)
        });
        for (id, seq) in sequences(&events) {
            assert_eq!(seq, [0, 27, 1, 5], "job {id:?}: one start and one end across the restart");
        }
        let history = fake_condor::history(&p.pool);
        assert!(history.iter().all(|r| r.status == HistoryStatus::Succeeded), "{history:?}");
    }

    #[test]
    fn submit_faults_fail_like_an_unreachable_schedd_or_a_rejected_file() {
        let p = Pool::new(|c| c.submit_transient_fail = 1.0);
        let out = p.submit("t", &p.grid_sub(LIVE, "t.log", &[0]), true);
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out.stderr).starts_with("\nERROR: "), "{:?}", text(&out.stderr));
        assert!(out.stdout.is_empty());
        assert!(p.q(&[]).is_empty() && fake_condor::history(&p.pool).is_empty(), "nothing was queued");
        // The same pool without the fault: the failed call used no cluster id.
        let config_path = p.pool.join("pool.toml");
        let mut config: PoolConfig = toml::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
        config.submit_transient_fail = 0.0;
        fake_condor::install_with_exe(&p.pool, &config, &util::cosched_bin()).unwrap();
        assert_eq!(text(&p.submit("t", &p.grid_sub(LIVE, "t.log", &[0]), true).stdout), "1.0 - 1.0\n");

        let (_, bad_exe_stderr, _) = fixture("condor_submit-bad-exe");
        let message = bad_exe_stderr.trim().strip_prefix("ERROR: ").unwrap().to_string();
        let p = Pool::new(|c| c.submit_permanent_error = Some(message.clone()));
        let out = p.submit("perm", &fixture_sub(&p, "condor_submit-plain"), false);
        assert_like_fixture(&out, "condor_submit-bad-exe", "", "");
        assert!(p.q(&[]).is_empty());
    }

    #[test]
    fn commands_without_a_pool_say_so() {
        for name in ["condor_submit", "condor_q", "condor_rm"] {
            let dir = util::tempdir();
            let link = dir.path().join(name);
            std::os::unix::fs::symlink(util::cosched_bin(), &link).unwrap();
            let out = Command::new(&link).arg("1").env_remove(fake_condor::POOL_ENV).output().unwrap();
            assert_eq!(out.status.code(), Some(1), "{name}");
            assert!(text(&out.stderr).contains(fake_condor::POOL_ENV), "{name}: {}", text(&out.stderr));
        }
    }
}

/// `cosched submit --simulate` of several kinds runs each kind with the load
/// the sites file's `[simulate.kinds]` declares (issue 55): on a site whose
/// file server serves 10 jobs of load 1 at full speed (beta 1), 10 I/O jobs
/// beside 30 CPU jobs (load 0) take their 400 s; without the declaration
/// every job is of load 1, L = 40, and each is slowed by D(40) = 4·(1 + 3).
/// A kind the file does not declare is refused, naming it.
mod simulate_kinds {
    use crate::util;

    const SITE: &str = "[[site]]\nname = \"knee\"\nslots = 40\n[site.simulate]\ncapacity = 10\nbeta = 1\n";

    /// The I/O jobs' mean run time of a bulk run of 10 `io` and 30 `cpu`
    /// jobs on `simulate` + the knee site.
    fn io_run_time(simulate: &str) -> f64 {
        let dir = util::tempdir();
        util::write_two_kinds(dir.path());
        std::fs::write(dir.path().join("sites.toml"), format!("{simulate}{SITE}")).unwrap();
        let out = util::cosched(
            dir.path(),
            &[
                "submit",
                "sites.toml",
                "--jobs",
                "io=10:io.sub",
                "--jobs",
                "cpu=30:cpu.sub",
                "--simulate",
                "--speedup",
                "2000",
                "--policy",
                "bulk",
                "--json",
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json is JSON");
        let io = summary["sites"][0]["kinds"].as_array().and_then(|k| k.iter().find(|k| k["name"] == "io"));
        io.and_then(|k| k["mean_run_time"].as_f64())
            .unwrap_or_else(|| panic!("the io kind's run time: {summary}"))
    }

    #[test]
    fn each_kind_loads_the_site_as_declared() {
        let declared = "[simulate]\nbase_runtime = 400\njitter = 0\n[simulate.kinds]\nio = { load = 1.0 }\ncpu = { load = 0.0 }\n";
        let t = io_run_time(declared);
        assert!((400.0..420.0).contains(&t), "I/O jobs beside CPU jobs of load 0: {t} s");
        let t = io_run_time("[simulate]\nbase_runtime = 400\njitter = 0\n");
        assert!(t > 2000.0, "every job of load 1 when no kind is declared: {t} s");
    }

    #[test]
    fn a_kind_the_sites_file_does_not_declare_is_refused() {
        let dir = util::tempdir();
        util::write_two_kinds(dir.path());
        let sites = format!("[simulate.kinds]\nio = {{ load = 1.0 }}\n{SITE}");
        std::fs::write(dir.path().join("sites.toml"), sites).unwrap();
        let args = ["submit", "sites.toml", "--jobs", "io=3:io.sub", "--jobs", "cpu=3:cpu.sub", "--simulate"];
        let out = util::cosched(dir.path(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("sites.toml") && err.contains("`cpu`") && err.contains("[simulate.kinds]"),
            "{err}"
        );
    }
}
