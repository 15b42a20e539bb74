//! `cosched daemon` end to end (issue 6): the real binary on a socket in a
//! temp dir, with the fake HTCondor (crash-safe runs through the state
//! database) or the in-process simulation (`simulate = true`, for the cheap
//! protocol tests). Users are told apart with the test-only
//! `trust_client_uid` + `as_uid`. Every wait is bounded; nothing is
//! synchronised by sleeping (the random delays before `kill -9` are the
//! crash moments, not synchronisation).

use crate::util;
use cosched::fake_condor::{self, FakeSite, HistoryStatus, PoolConfig};
use cosched::sim::{Capacity, SiteParams};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Simulated seconds per real second of the fake pool.
const SPEEDUP: f64 = 400.0;
/// Longest any one wait may take.
const PATIENCE: Duration = Duration::from_secs(120);

/// The daemon config's floor on checkpoint intervals in these tests: low,
/// so that runs of a few seconds with `[run] checkpoint_every = 0.05` are
/// checkpointed (the default floor is 10 s).
const LOW_FLOOR: &str = "min_checkpoint_every = 0.01";

const USER_A: u32 = 1001;
const USER_B: u32 = 1002;

/// Polls `probe` until it gives a value; fails after `patience`.
#[allow(clippy::disallowed_methods)] // a bounded wait needs the real clock
fn wait_for<T>(what: &str, patience: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(start.elapsed() < patience, "gave up after {patience:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A directory with a fake pool (two grid sites), the inputs and a daemon
/// config.
struct Setup {
    dir: tempfile::TempDir,
    pool: PathBuf,
    /// The fake pool's HTCondor tools: the daemon's `condor_bin_dir`, and
    /// the `bin_dir` of the sites files the tests hand it.
    bin: PathBuf,
}

impl Setup {
    fn new(tweak: impl FnOnce(&mut PoolConfig), base_runtime: f64, config_extra: &str) -> Setup {
        let dir = util::tempdir();
        let pool = dir.path().join("pool");
        let slow = SiteParams { capacity: Capacity::Finite(6.0), beta: 0.5, ..util::quick_site(16) };
        let mut config = PoolConfig {
            speedup: SPEEDUP,
            base_runtime,
            jitter: 0.2,
            seed: 11,
            sites: vec![
                FakeSite::grid("condor good.example good.example:9619", util::quick_site(40)),
                FakeSite::grid("condor slow.example slow.example:9619", slow),
            ],
            ..PoolConfig::default()
        };
        tweak(&mut config);
        let bin =
            fake_condor::install_with_exe(&pool, &config, &util::cosched_bin()).expect("fake pool installs");
        util::write_echo_job(dir.path());
        // The tests submit as users of other uids, who must be able to read
        // the job's program (the daemon takes only files its caller may
        // read), whatever the umask.
        for (path, readable) in [(dir.path().to_path_buf(), 0o755), (dir.path().join("job.sh"), 0o444)] {
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() | readable;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let condor = format!(
            "[condor]\nbin_dir = \"{}\"\nsubmit_timeout = 20\nretries = 6\npoll_interval = 0.2\n\n",
            bin.display()
        );
        let good = "[[site]]\nname = \"good\"\ngrid_resource = \"condor good.example good.example:9619\"\nslots = 40\n\n";
        let slow = "[[site]]\nname = \"slow\"\ngrid_resource = \"condor slow.example slow.example:9619\"\nslots = 16\n";
        std::fs::write(dir.path().join("good.toml"), format!("{condor}{good}")).unwrap();
        std::fs::write(dir.path().join("both.toml"), format!("{condor}{good}{slow}")).unwrap();
        let s = Setup { dir, pool, bin };
        s.write_config(config_extra);
        s
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write_config(&self, extra: &str) {
        let text = format!(
            "socket = \"d.sock\"\nstate_dir = \"state\"\nsocket_mode = \"0600\"\ntrust_client_uid = true\n\
             condor_bin_dir = \"{}\"\n{LOW_FLOOR}\n{extra}\n",
            self.bin.display()
        );
        std::fs::write(self.path("daemon.toml"), text).unwrap();
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(util::cosched_bin());
        cmd.args(args)
            .current_dir(self.dir.path())
            .env(fake_condor::POOL_ENV, &self.pool)
            .env("COSCHED_ALLOW_ROOT", "1")
            .env("COSCHED_LOG", "info")
            // What foreground runs learn stays in the test's directory.
            .env(cosched::state::memory::MEMORY_ENV, self.path("memory.db"))
            .env_remove("NOTIFY_SOCKET")
            .env_remove("COSCHED_SOCKET")
            .stdin(Stdio::null());
        cmd
    }

    /// Starts the daemon and waits until it answers.
    fn start(&self) -> Daemon {
        self.start_logging("info")
    }

    /// Starts the daemon logging at `filter` (`COSCHED_LOG`) and waits
    /// until it answers.
    fn start_logging(&self, filter: &str) -> Daemon {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.path("daemon.log")).unwrap();
        let child = self
            .command(&["daemon", "--config", "daemon.toml"])
            .env("COSCHED_LOG", filter)
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("the daemon starts");
        let mut d = Daemon { child: Some(child), socket: self.path("d.sock"), log: self.path("daemon.log") };
        wait_for("the daemon to answer a ping", PATIENCE, || {
            if let Some(status) = d.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("the daemon exited at start ({status}):\n{}", d.log_text());
            }
            d.try_request(&json!({"op": "ping"})).filter(|r| r["ok"] == true)
        });
        d
    }

    fn submit(&self, d: &Daemon, uid: u32, n: u64, sites: &str, policy: Option<&str>) -> u64 {
        let mut req = json!({
            "op": "submit", "n_jobs": n,
            "sites_path": self.path(sites).display().to_string(),
            "sites_toml": std::fs::read_to_string(self.path(sites)).unwrap(),
            "job_path": self.path("job.sub").display().to_string(),
            "job_sub": std::fs::read_to_string(self.path("job.sub")).unwrap(),
            "cwd": self.dir.path().display().to_string(),
            "as_uid": uid,
        });
        if let Some(p) = policy {
            req["policy"] = json!(p);
        }
        let r = d.request(&req);
        assert_eq!(r["ok"], true, "submit refused: {r}");
        r["run"].as_u64().expect("a run id")
    }

    /// Successful executions per (CoschedRun, job index), over every proc the
    /// pool ever queued.
    fn successes(&self) -> BTreeMap<(String, u64), usize> {
        let mut count = BTreeMap::new();
        for record in fake_condor::history(&self.pool) {
            if record.status == HistoryStatus::Succeeded {
                let key = (record.run.clone().unwrap_or_default(), record.job.expect("CoschedJob"));
                *count.entry(key).or_insert(0) += 1;
            }
        }
        count
    }

    /// Every job of `runs` runs of `n` jobs succeeded exactly once.
    fn assert_exactly_once(&self, runs: usize, n: u64, context: &str) {
        let successes = self.successes();
        let twice: Vec<_> = successes.iter().filter(|(_, c)| **c > 1).collect();
        assert!(twice.is_empty(), "{context}: jobs that succeeded more than once: {twice:?}");
        let mut per_run: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for (run, job) in successes.keys() {
            per_run.entry(run.as_str()).or_default().push(*job);
        }
        assert_eq!(per_run.len(), runs, "{context}: runs seen by the pool: {:?}", per_run.keys());
        for (run, jobs) in &per_run {
            assert_eq!(*jobs, (0..n).collect::<Vec<_>>(), "{context}: run {run}: jobs that succeeded");
        }
        let left = fake_condor::history(&self.pool)
            .iter()
            .filter(|r| matches!(r.status, HistoryStatus::Queued | HistoryStatus::Held))
            .count();
        assert_eq!(left, 0, "{context}: jobs left at the sites");
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = fake_condor::stop(&self.pool);
    }
}

struct Daemon {
    child: Option<Child>,
    socket: PathBuf,
    log: PathBuf,
}

impl Daemon {
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn try_request(&self, req: &Value) -> Option<Value> {
        let mut stream = UnixStream::connect(&self.socket).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
        writeln!(stream, "{req}").ok()?;
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).ok()?;
        serde_json::from_str(&line).ok()
    }

    fn request(&self, req: &Value) -> Value {
        self.try_request(req)
            .unwrap_or_else(|| panic!("no answer to {req}; daemon log:\n{}", self.log_text()))
    }

    /// Status of every unfinished run, as an admin (root) sees it.
    fn run(&self, id: u64) -> Value {
        let r = self.request(&json!({"op": "status", "run": id}));
        assert_eq!(r["ok"], true, "{r}");
        r["runs"][0].clone()
    }

    /// Waits for every run in `ids` to end `done`; on a timeout it prints
    /// what a stall needs to be diagnosed: the run's status, the end of the
    /// daemon's log and the pool's unsettled jobs.
    #[allow(clippy::disallowed_methods)] // a bounded wait needs the real clock
    fn wait_finished(&self, ids: &[u64], pool: &std::path::Path) {
        for &id in ids {
            let start = Instant::now();
            loop {
                let run = self.run(id);
                let state = run["state"].as_str().unwrap_or("").to_string();
                match state.as_str() {
                    "done" => break,
                    "failed" | "cancelled" => panic!("run {id} ended {state}: {run}\n{}", self.log_text()),
                    _ => {}
                }
                if start.elapsed() >= PATIENCE {
                    let log = self.log_text();
                    let tail: Vec<&str> = log.lines().rev().take(80).collect();
                    let unsettled: Vec<String> = fake_condor::history(pool)
                        .iter()
                        .filter(|r| matches!(r.status, HistoryStatus::Queued | HistoryStatus::Held))
                        .map(|r| format!("{r:?}"))
                        .collect();
                    panic!(
                        "gave up after {PATIENCE:?} waiting for run {id} to finish: {run}\n\
                         jobs still queued or held at the pool ({}):\n{}\ndaemon log (last 80 lines):\n{}",
                        unsettled.len(),
                        unsettled.join("\n"),
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0);
    }

    /// Waits for the daemon to exit; returns its exit code.
    fn wait_exit(&mut self) -> Option<i32> {
        let mut child = self.child.take().unwrap();
        let status = wait_for("the daemon to exit", PATIENCE, || child.try_wait().unwrap());
        status.code()
    }

    fn kill9(&mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().expect("kill -9");
        let _ = child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn site_of<'a>(run: &'a Value, name: &str) -> &'a Value {
    run["sites"].as_array().and_then(|s| s.iter().find(|x| x["name"] == name)).unwrap_or(&Value::Null)
}

fn out_at(site: &Value) -> u64 {
    ["queued", "running", "held"].iter().map(|k| site[k].as_u64().unwrap_or(0)).sum()
}

#[test]
fn two_users_share_a_site_by_weight_and_cannot_see_or_cancel_each_other() {
    // 8 slots of `good` for the daemon's users; A weighs 3, B weighs 1: while
    // both want more than that, A may have 6 out and B 2 (equation 1).
    let s = Setup::new(|_| {}, 60.0, "[capacity]\ngood = 8\n[weights]\n\"1001\" = 3\n\"1002\" = 1\n");
    let d = s.start();
    let n = 40;
    let b = s.submit(&d, USER_B, n, "good.toml", Some("bulk"));
    // B alone takes everything it may (all 8) before A arrives.
    wait_for("B to run alone", PATIENCE, || (out_at(site_of(&d.run(b), "good")) > 2).then_some(()));
    let a = s.submit(&d, USER_A, n, "good.toml", Some("bulk"));

    // Isolation, while both run.
    let mine = d.request(&json!({"op": "runs", "as_uid": USER_A}));
    let ids: Vec<u64> = mine["runs"].as_array().unwrap().iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, vec![a], "A lists only A's run: {mine}");
    for op in [
        json!({"op": "status", "run": b}),
        json!({"op": "cancel", "run": b}),
        json!({"op": "watch", "run": b}),
    ] {
        let mut req = op.clone();
        req["as_uid"] = json!(USER_A);
        let r = d.request(&req);
        assert_eq!(r["ok"], false, "A may not {op}: {r}");
        assert!(r["error"].as_str().unwrap().contains(&format!("no run {b}")), "{r}");
    }
    let admin = d.request(&json!({"op": "runs"}));
    assert_eq!(admin["runs"].as_array().unwrap().len(), 2, "root sees both: {admin}");

    let mut saw_weighted_split = false;
    let mut saw_release_to_b = false;
    wait_for("both runs to finish", PATIENCE, || {
        let (ra, rb) = (d.run(a), d.run(b));
        let (ga, gb) = (site_of(&ra, "good"), site_of(&rb, "good"));
        let both_wait = ga["held_back"].as_u64() > Some(0) && gb["held_back"].as_u64() > Some(0);
        if both_wait && ga["fair_cap"] == 6 && gb["fair_cap"] == 2 && out_at(ga) <= 6 && out_at(gb) <= 2 {
            saw_weighted_split = true;
        }
        // Once A has nothing left to send, its share flows to B.
        if ra["state"] == "done" && rb["state"] == "running" && gb["fair_cap"].as_u64() > Some(2) {
            saw_release_to_b = true;
        }
        (ra["state"] == "done" && rb["state"] == "done").then_some(())
    });
    assert!(
        saw_weighted_split,
        "never saw the 6/2 split of 8 slots with both users waiting\n{}",
        d.log_text()
    );
    assert!(
        saw_release_to_b || d.run(b)["done"] == n,
        "B's cap never grew after A finished\n{}",
        d.log_text()
    );
    assert_ne!(d.run(b)["state"], "cancelled", "A's cancel of B's run was refused");
    s.assert_exactly_once(2, n, "fair share");
}

#[test]
fn sigterm_then_restart_resumes_both_runs() {
    let s = Setup::new(|_| {}, 100.0, "[capacity]\ngood = 6\nslow = 4\n");
    let mut d = s.start();
    let n = 30;
    let a = s.submit(&d, USER_A, n, "both.toml", None);
    let b = s.submit(&d, USER_B, n, "both.toml", None);
    wait_for("both runs to make progress", PATIENCE, || {
        (d.run(a)["done"].as_u64() >= Some(3) && d.run(b)["done"].as_u64() >= Some(3)).then_some(())
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(), Some(0), "SIGTERM is a clean stop:\n{}", d.log_text());
    assert!(!s.path("d.sock").exists(), "the socket is removed at a clean stop");
    let left_out = fake_condor::history(&s.pool).iter().filter(|r| r.status == HistoryStatus::Queued).count();
    let d = s.start();
    for id in [a, b] {
        let run = d.run(id);
        assert!(
            ["resuming", "running", "done"].contains(&run["state"].as_str().unwrap_or_default()),
            "run {id} after restart: {run}"
        );
    }
    d.wait_finished(&[a, b], &s.pool);
    assert_eq!(d.run(a)["owner"], USER_A);
    s.assert_exactly_once(2, n, &format!("after SIGTERM with {left_out} job(s) left at the sites"));
}

#[test]
fn a_cancelled_run_has_its_report_counting_what_the_pool_ran() {
    let s = Setup::new(|_| {}, 100.0, "");
    let d = s.start();
    let id = s.submit(&d, USER_A, 60, "both.toml", None);
    wait_for("the run to make progress", PATIENCE, || (d.run(id)["done"].as_u64() >= Some(3)).then_some(()));
    assert_eq!(d.request(&json!({"op": "cancel", "run": id, "as_uid": USER_A}))["ok"], true);
    wait_for("the run to be cancelled", PATIENCE, || (d.run(id)["state"] == "cancelled").then_some(()));
    let runs: Vec<PathBuf> = std::fs::read_dir(s.path("state/runs"))
        .unwrap()
        .map(|e| e.unwrap().path().join("report/report.json"))
        .collect();
    assert_eq!(runs.len(), 1, "one run directory: {runs:?}");
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(&runs[0])
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", runs[0].display(), d.log_text())),
    )
    .unwrap();
    let ran: usize = s.successes().values().sum();
    assert!(ran < 60, "the cancel came before the run's end ({ran} jobs succeeded)");
    assert_eq!(report["summary"]["counts"]["succeeded"].as_u64(), Some(ran as u64), "{}", report["summary"]);
    assert_eq!(d.run(id)["out"], 0, "a cancelled run has nothing left at the sites");
}

/// The one directory of the daemon's runs in the state directory.
fn run_dir(s: &Setup) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(s.path("state/runs")).ok()?.map(|e| e.unwrap().path()).collect();
    assert!(dirs.len() <= 1, "one run directory: {dirs:?}");
    dirs.pop()
}

fn read_json(path: &std::path::Path, d: &Daemon) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}\n{}", path.display(), d.log_text()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
}

/// Daemon runs keep checkpoints like `cosched submit` (`[run]
/// checkpoint_every` of their sites file), and a restarted daemon resumes
/// from one: it replays only what lies past the checkpoint, not the whole run.
#[test]
fn a_daemon_run_stopped_and_restarted_resumes_from_its_checkpoint() {
    let s = Setup::new(|_| {}, 200.0, "[capacity]\ngood = 6\nslow = 4\n");
    let both = std::fs::read_to_string(s.path("both.toml")).unwrap();
    std::fs::write(s.path("ckpt.toml"), format!("{both}\n[run]\ncheckpoint_every = 0.05\n")).unwrap();
    let mut d = s.start();
    let n = 80;
    let id = s.submit(&d, USER_A, n, "ckpt.toml", None);
    let checkpoint = wait_for("a checkpoint of the run, with jobs done", PATIENCE, || {
        let file = run_dir(&s)?.join("checkpoint");
        (file.is_file() && d.run(id)["done"].as_u64() >= Some(3)).then_some(file)
    });
    let done_before = d.run(id)["done"].as_u64().unwrap();
    assert!(done_before < n, "the run ended before the stop (make it longer)");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(), Some(0), "SIGTERM is a clean stop:\n{}", d.log_text());
    assert!(checkpoint.is_file());
    restart_from_the_checkpoint(&s, id, n, "after a restart from the checkpoint");
}

/// Starts the daemon again after a stop of run `id` (of `n` jobs), and
/// checks that the run goes on from its checkpoint to the end, every job
/// run once and counted.
fn restart_from_the_checkpoint(s: &Setup, id: u64, n: u64, context: &str) {
    let d = s.start();
    wait_for("the run to resume", PATIENCE, || {
        d.log_text().contains(&format!("run {id}: resuming")).then_some(())
    });
    let log = d.log_text();
    assert!(log.contains(&format!("run {id}: resuming from its checkpoint")), "resumed without it:\n{log}");
    assert!(!log.contains("not using the checkpoint"), "{log}");
    d.wait_finished(&[id], &s.pool);
    s.assert_exactly_once(1, n, context);
    assert_eq!(d.run(id)["done"].as_u64(), Some(n), "the restored tally counts the whole run: {}", d.run(id));
}

/// A tester's SIGTERM of the daemon: the log said `run 4: checkpointed for
/// the next start` and systemd's status "checkpointing runs", but only the
/// periodic checkpoint (`[run] checkpoint_every`) was ever written, and the
/// restart replayed the run's 888 past events. A clean stop takes a
/// checkpoint of each run, which the restart goes on from.
#[test]
fn a_sigterm_checkpoints_each_run_and_the_restart_goes_on_from_there() {
    let s = Setup::new(|_| {}, 200.0, "[capacity]\ngood = 6\nslow = 4\n");
    let both = std::fs::read_to_string(s.path("both.toml")).unwrap();
    // No periodic checkpoint while the test runs.
    std::fs::write(s.path("hourly.toml"), format!("{both}\n[run]\ncheckpoint_every = 3600\n")).unwrap();
    let mut d = s.start();
    let n = 80;
    let id = s.submit(&d, USER_A, n, "hourly.toml", None);
    wait_for("the run to make progress", PATIENCE, || (d.run(id)["done"].as_u64() >= Some(3)).then_some(()));
    assert!(d.run(id)["done"].as_u64() < Some(n), "the run ended before the stop (make it longer)");
    let checkpoint = run_dir(&s).expect("the run's directory").join("checkpoint");
    assert!(!checkpoint.exists(), "a periodic checkpoint already (this test then sees nothing)");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(), Some(0), "SIGTERM is a clean stop:\n{}", d.log_text());
    let log = d.log_text();
    assert!(checkpoint.is_file(), "no checkpoint of the stop:\n{log}");
    assert!(log.contains("checkpoint of the stop written to"), "{log}");
    assert!(!log.contains("checkpointed for the next start"), "{log}");
    restart_from_the_checkpoint(&s, id, n, "after a restart from the checkpoint of the stop");
}

/// A tester's `kill -9` and restart: `cosched runs` showed the run
/// `running` with 0 of its jobs done while it replayed its past, then its
/// true count. It is `resuming` until its counts are the whole run's.
#[test]
fn a_restarted_run_shows_resuming_until_its_past_is_counted() {
    // A few restarts: the replay is short, and a loaded machine may answer
    // the first status only after it.
    const RESTARTS: usize = 4;
    let s = Setup::new(|_| {}, 200.0, "[capacity]\ngood = 6\nslow = 4\n");
    let mut d = s.start();
    let n = 160;
    let id = s.submit(&d, USER_A, n, "both.toml", None);
    let mut before = 0;
    let mut replays_seen = 0;
    for restart in 0..RESTARTS {
        before = wait_for("more jobs done", PATIENCE, || {
            d.run(id)["done"].as_u64().filter(|&done| done >= before + 5)
        });
        assert!(before < n, "the run ended before kill {restart} (make it longer)");
        d.kill9();
        d = s.start();
        let mut seen = Vec::new();
        wait_for("the run's count after the restart", PATIENCE, || {
            let runs = d.request(&json!({"op": "runs"}));
            let run = runs["runs"].as_array().and_then(|r| r.iter().find(|r| r["id"] == id)).cloned()?;
            let (state, done) = (run["state"].as_str()?.to_string(), run["done"].as_u64()?);
            if seen.last() != Some(&(state.clone(), done)) {
                seen.push((state.clone(), done));
            }
            (state != "resuming").then_some(())
        });
        for (state, done) in &seen {
            assert!(
                state == "resuming" || (state == "running" && *done >= before) || state == "done",
                "restart {restart}: shown {state} with {done} done, where {before} were done before: {seen:?}"
            );
        }
        replays_seen += usize::from(seen[0].0 == "resuming");
    }
    assert!(replays_seen > 0, "no status was asked during a replay in {RESTARTS} restarts");
    d.wait_finished(&[id], &s.pool);
    s.assert_exactly_once(1, n, "after kills");
}

/// A tester's `watch` of a run they cancelled: its last line was
/// `run 3: cancelled, 151/2000 done, 0 given up, 0 out; good 160q/0r/133d`
/// while none of its jobs was queued anywhere: the jobs the fair share held
/// back at the cancel, which never go out, were shown queued.
#[test]
fn a_cancelled_run_shows_no_job_queued_or_held_back() {
    let s = simulated("[capacity]\nalpha = 4\nbeta = 4\n");
    let d = s.start();
    let id = s.submit(&d, USER_A, 400, "sim.toml", Some("bulk"));
    wait_for("jobs held back by the cap", PATIENCE, || {
        let run = d.run(id);
        (run["state"] == "running" && site_of(&run, "alpha")["held_back"].as_u64() > Some(0)).then_some(())
    });
    assert_eq!(d.request(&json!({"op": "cancel", "run": id, "as_uid": USER_A}))["ok"], true);
    wait_for("the run to be cancelled", PATIENCE, || (d.run(id)["state"] == "cancelled").then_some(()));
    let run = d.run(id);
    assert_eq!(run["out"], 0, "{run}");
    for site in run["sites"].as_array().unwrap() {
        assert_eq!((&site["queued"], &site["held_back"]), (&json!(0), &json!(0)), "{site}");
    }
    let out = s
        .command(&["watch", &id.to_string(), "--socket", d.socket.to_str().unwrap()])
        .env("COSCHED_AS_UID", USER_A.to_string())
        .output()
        .expect("the client runs");
    let line = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().to_string();
    assert!(
        line.contains("cancelled") && line.contains("alpha 0q/0r/") && line.contains("beta 0q/0r/"),
        "{line}"
    );
}

/// A tester's `status` of a finished run after a restart: the header said
/// `151/2000 done`, the clock `t = 0 s` and every site's row zeros. A
/// finished run shows after a restart what it showed when it ended.
#[test]
fn a_finished_run_shows_its_figures_after_a_restart() {
    let s = Setup::new(|_| {}, 60.0, "");
    let mut d = s.start();
    let id = s.submit(&d, USER_A, 8, "both.toml", Some("bulk"));
    d.wait_finished(&[id], &s.pool);
    let ended = d.run(id);
    assert!(ended["time"].as_f64() > Some(0.0), "{ended}");
    assert!(ended["sites"].as_array().unwrap().iter().any(|x| x["done"].as_u64() > Some(0)), "{ended}");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(), Some(0), "{}", d.log_text());
    let d = s.start();
    assert_eq!(d.run(id), ended, "after the restart");
}

/// A tester's daemon config naming a `sites` file that is not there: the
/// daemon bound its socket, then exited 1 with a message that did not say
/// the file came from its config. It is the config's error (exit 2),
/// found before the socket exists.
#[test]
fn a_daemon_config_naming_a_missing_sites_file_exits_2_before_listening() {
    let s = Setup::new(|_| {}, 60.0, "");
    for simulate in [false, true] {
        let sites = "sites = [\"missing.toml\"]\n";
        s.write_config(&if simulate { SIMULATED.replace("sim.toml", "missing.toml") } else { sites.into() });
        let config = s.path("daemon.toml");
        let args = ["daemon", "--config", config.to_str().unwrap()];
        let out = s.command(&args).stdout(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "simulate = {simulate}:\n{stderr}");
        let named = format!(
            "{}: `sites` names {}",
            s.path("daemon.toml").display(),
            s.path("missing.toml").display()
        );
        assert!(stderr.contains(&named), "simulate = {simulate}: says it is the config's:\n{stderr}");
        assert!(!stderr.contains("listening on"), "simulate = {simulate}: it listened first:\n{stderr}");
    }
}

/// A tester's raw client sent `job_path: "rel.sub"` with its `cwd`: the
/// `cwd` was never read, and the description's relative names resolved
/// against the daemon's own working directory. Every path of a submit is
/// absolute: the daemon has no working directory of its clients'.
#[test]
fn a_submit_naming_a_file_by_a_relative_path_is_refused() {
    let s = Setup::new(|_| {}, 60.0, "");
    let d = s.start();
    // The daemon's working directory holds both files (as `Setup` starts
    // it): a relative path would name them there.
    let r = d.request(&json!({
        "op": "submit", "n_jobs": 4, "policy": "bulk",
        "sites_path": s.path("both.toml").display().to_string(),
        "sites_toml": std::fs::read_to_string(s.path("both.toml")).unwrap(),
        "job_path": "job.sub",
        "job_sub": std::fs::read_to_string(s.path("job.sub")).unwrap(),
        "cwd": s.dir.path().display().to_string(), "as_uid": USER_A,
    }));
    let error = r["error"].as_str().unwrap_or_default();
    assert_eq!(r["ok"], false, "{r}");
    assert!(error.starts_with("\"job.sub\": not an absolute path"), "{error}");
    assert!(error.ends_with("nothing was submitted"), "{error}");
    assert_eq!(d.request(&json!({"op": "runs"}))["runs"], json!([]), "nothing was recorded");
}

/// A tester's submit of a sites file with warnings: `cosched submit`
/// prints them in the foreground, `--daemon` dropped them. The submit's
/// answer carries them, and the client prints them on stderr.
#[test]
fn a_daemon_submit_tells_the_client_the_sites_files_warnings() {
    let s = Setup::new(|_| {}, 60.0, "");
    let good = std::fs::read_to_string(s.path("good.toml")).unwrap();
    std::fs::write(s.path("warn.toml"), format!("[policy]\nname = \"bulk\"\n\n{good}max_jobs = 10\n"))
        .unwrap();
    let check = s.command(&["check", "warn.toml", "job.sub"]).output().expect("cosched check runs");
    let foreground = String::from_utf8_lossy(&check.stderr);
    let said = "site `good`: policy `bulk` does not honour max_jobs";
    assert!(foreground.contains(said), "the foreground's warning:\n{foreground}");
    let d = s.start();
    let out = s
        .command(&["submit", "4", "warn.toml", "job.sub", "--daemon"])
        .env("COSCHED_SOCKET", &d.socket)
        .env("COSCHED_AS_UID", USER_A.to_string())
        .output()
        .expect("the client runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the run is accepted:\n{stderr}");
    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("stdout is the run id alone");
    let warned = format!("cosched: warning: {}:", s.path("warn.toml").display());
    assert!(stderr.contains(&warned) && stderr.contains(said), "the client is told:\n{stderr}");
    d.wait_finished(&[id], &s.pool);
}

/// Found by a tester attacking the daemon as a hostile user: a client's
/// `[run] checkpoint_every` (its sites file, sent over the socket) set how
/// often the shared daemon wrote and synced the run's checkpoint, and
/// 0.01 s made it one write per step of the run's engine. The daemon
/// checkpoints at most every `min_checkpoint_every` (here 1 s), and the
/// client is told so when it submits.
#[test]
#[allow(clippy::disallowed_methods)] // how long the run took bounds its checkpoints
fn a_clients_tiny_checkpoint_interval_is_raised_to_the_daemons_floor() {
    const FLOOR: f64 = 1.0;
    let s = Setup::new(|_| {}, 200.0, "[capacity]\ngood = 6\nslow = 4\n");
    let config = std::fs::read_to_string(s.path("daemon.toml")).unwrap();
    assert!(config.contains(LOW_FLOOR));
    std::fs::write(
        s.path("daemon.toml"),
        config.replace(LOW_FLOOR, &format!("min_checkpoint_every = {FLOOR}")),
    )
    .unwrap();
    let both = std::fs::read_to_string(s.path("both.toml")).unwrap();
    std::fs::write(s.path("tiny.toml"), format!("{both}\n[run]\ncheckpoint_every = 0.01\n")).unwrap();
    // Each checkpoint taken is a debug line of `run::drive`.
    let d = s.start_logging("info,cosched::run::drive=debug");
    let n = 80;
    let started = Instant::now();
    let out = s
        .command(&["submit", &n.to_string(), "tiny.toml", "job.sub", "--daemon"])
        .env("COSCHED_SOCKET", &d.socket)
        .env("COSCHED_AS_UID", USER_A.to_string())
        .output()
        .expect("the client runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the run is accepted:\n{stderr}");
    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("stdout is the run id alone");
    assert!(
        stderr.contains("warning: ")
            && stderr.contains("tiny.toml: [run] checkpoint_every = 0.01: ")
            && stderr.contains(&format!("min_checkpoint_every); this run is checkpointed every {FLOOR} s")),
        "the client is told:\n{stderr}"
    );
    d.wait_finished(&[id], &s.pool);
    let took = started.elapsed().as_secs_f64();
    let log = d.log_text();
    let taken = log.matches("bytes taken in").count();
    assert!(log.contains("this run is checkpointed every"), "the daemon's log says so too:\n{log}");
    assert!(took > 2.0 * FLOOR, "the run took {took:.1} s: too short to see checkpoints (make it longer)");
    assert!(taken >= 1, "the run was checkpointed at all (else this test sees nothing):\n{log}");
    assert!(
        taken as f64 <= took / FLOOR + 1.0,
        "{taken} checkpoints in {took:.1} s, with a floor of {FLOOR} s: the client's interval was used"
    );
    s.assert_exactly_once(1, n, "a run checkpointed at the daemon's floor");
}

/// A daemon run writes its report as `cosched submit` does: whenever it
/// stops (the report of the logs so far, for a run stopped with jobs out),
/// and again when it ends, in the same format.
#[test]
fn a_daemon_run_writes_its_report_as_a_foreground_run_does() {
    let s = Setup::new(|_| {}, 100.0, "[capacity]\ngood = 6\nslow = 4\n");
    let n = 60;
    let foreground = s
        .command(&["submit", &n.to_string(), "both.toml", "job.sub", "--state-dir", "fg", "--json"])
        .output()
        .expect("cosched submit runs");
    assert_eq!(foreground.status.code(), Some(0), "{}", String::from_utf8_lossy(&foreground.stderr));
    let fg_runs: Vec<PathBuf> =
        std::fs::read_dir(s.path("fg/runs")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(fg_runs.len(), 1, "{fg_runs:?}");

    let mut d = s.start();
    let id = s.submit(&d, USER_A, n, "both.toml", None);
    wait_for("jobs done and jobs out", PATIENCE, || {
        let run = d.run(id);
        (run["done"].as_u64() >= Some(1) && run["out"].as_u64() > Some(0)).then_some(())
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(), Some(0), "SIGTERM is a clean stop:\n{}", d.log_text());
    let report = run_dir(&s).expect("the run's directory").join("report/report.json");
    let stopped = read_json(&report, &d);
    let at_stop = stopped["summary"]["counts"]["succeeded"].as_u64().expect("a count of successes");
    assert!(
        at_stop < n,
        "the report of a run stopped half-way counts what ran so far: {}",
        stopped["summary"]
    );

    let d = s.start();
    d.wait_finished(&[id], &s.pool);
    s.assert_exactly_once(2, n, "a foreground run, and a daemon run stopped and restarted");
    let ended = read_json(&report, &d);
    assert_eq!(
        ended["summary"]["counts"]["succeeded"].as_u64(),
        Some(n),
        "rewritten at the end: {}",
        ended["summary"]
    );
    let fg = read_json(&fg_runs[0].join("report/report.json"), &d);
    assert_eq!(keys(&ended), keys(&fg), "the daemon's report has the foreground's parts");
    assert_eq!(keys(&ended["summary"]), keys(&fg["summary"]), "and the same summary");
    // What the daemon's run learned is kept in the daemon's state directory,
    // for all its users; the foreground run's in the user's memory.
    for (file, whose) in [("state/memory.db", "the daemon's"), ("memory.db", "the user's")] {
        let memory = cosched::state::MemoryDb::open(&s.path(file)).unwrap().load().unwrap();
        let sites: Vec<&str> = memory.iter().map(|(site, _, _)| site).collect();
        assert_eq!(sites, ["good", "slow"], "{whose} memory: {memory:?}");
    }
}

/// Issue 55: the daemon takes a run of several kinds as `cosched submit`
/// does (`submit SITES --jobs … --daemon`), beside a run of one kind of
/// another user at the same sites; it records the run's kinds, and a
/// restarted daemon resumes it with them: the jobs submitted after the
/// restart still run their own kind's description.
#[test]
fn a_daemon_run_of_two_kinds_resumes_with_its_kinds_after_a_restart() {
    let s = Setup::new(|_| {}, 200.0, "[capacity]\ngood = 6\nslow = 4\n");
    util::write_two_kinds(s.dir.path());
    let mut d = s.start();
    let args = ["submit", "both.toml", "--jobs", "io=12:io.sub", "--jobs", "18:cpu.sub", "--daemon"];
    let out = s.command(&args).env("COSCHED_SOCKET", s.path("d.sock")).output().expect("the client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", String::from_utf8_lossy(&out.stderr));
    let id: u64 = stdout.trim().parse().unwrap_or_else(|_| panic!("a run id, not {stdout:?}"));
    let other = s.submit(&d, USER_B, 10, "both.toml", None);
    assert_eq!(d.run(id)["n_jobs"], 30, "{}", d.run(id));
    wait_for("the run of two kinds to make progress", PATIENCE, || {
        (d.run(id)["done"].as_u64() >= Some(3)).then_some(())
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(), Some(0), "SIGTERM is a clean stop:\n{}", d.log_text());
    let submitted_before = fake_condor::history(&s.pool).len();
    let d = s.start();
    d.wait_finished(&[id, other], &s.pool);
    assert!(d.log_text().contains(&format!("run {id}: resuming")), "{}", d.log_text());
    let history = fake_condor::history(&s.pool);
    assert!(history.len() > submitted_before, "nothing of the run was left for after the restart");
    // The other run of one kind ran every job once; the run of two kinds
    // ran each of its jobs once, of its own kind, before the restart and
    // after it.
    let (plain, kinded): (Vec<_>, Vec<_>) = history.iter().partition(|r| r.kind.as_deref() == Some("job"));
    let succeeded = |records: &[&fake_condor::HistoryRecord]| {
        let mut jobs: Vec<u64> = records
            .iter()
            .filter(|r| r.status == HistoryStatus::Succeeded)
            .map(|r| r.job.expect("CoschedJob"))
            .collect();
        jobs.sort_unstable();
        jobs
    };
    assert_eq!(succeeded(&plain), (0..10).collect::<Vec<_>>(), "the run of one kind");
    assert_eq!(succeeded(&kinded), (0..30).collect::<Vec<_>>(), "the run of two kinds");
    util::assert_each_job_of_its_kind(kinded.into_iter(), (12, 18), "after a restart");
    // `status` shows each kind per site, its past replayed after the
    // restart: jobs done (adding up to the site's), run time, window.
    let run = d.run(id);
    let mut done_of = BTreeMap::new();
    for site in run["sites"].as_array().unwrap() {
        let kinds = site["kinds"].as_array().unwrap_or_else(|| panic!("each kind at {site}"));
        let names: Vec<&str> = kinds.iter().map(|k| k["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["io", "cpu"], "{site}");
        let done: u64 = kinds.iter().map(|k| k["done"].as_u64().unwrap()).sum();
        assert_eq!(done, site["done"].as_u64().unwrap(), "the kinds add up to the site: {site}");
        for k in kinds {
            *done_of.entry(k["name"].as_str().unwrap().to_string()).or_insert(0) +=
                k["done"].as_u64().unwrap();
            assert!(k["window"].as_f64().is_some(), "the kind's window there: {site}");
            if k["done"].as_u64() > Some(0) {
                assert!(k["mean_run_time"].as_f64().is_some_and(|t| t > 0.0), "{site}");
            }
        }
    }
    assert_eq!(done_of, BTreeMap::from([("cpu".to_string(), 18), ("io".to_string(), 12)]), "{run}");
    assert!(d.run(other)["sites"][0].get("kinds").is_none(), "a run of one kind shows none");
    let out = s
        .command(&["status", &id.to_string()])
        .env("COSCHED_SOCKET", s.path("d.sock"))
        .output()
        .expect("the client runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    for kind in ["io", "cpu"] {
        let lines: Vec<&str> =
            text.lines().filter(|l| l.trim_start().starts_with(&format!("{kind} "))).collect();
        assert_eq!(lines.len(), 2, "a line of {kind} per site:\n{text}");
        assert!(lines.iter().all(|l| l.contains(" done") && l.contains("window ")), "{text}");
    }
}

#[test]
fn kill_9_at_20_random_moments_then_restart_runs_every_job_exactly_once() {
    #[allow(clippy::disallowed_methods)] // a fresh seed per run, printed; COSCHED_TEST_SEED repeats one
    let seed = std::env::var("COSCHED_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
            | 1
    });
    eprintln!("daemon kill -9 test seed: {seed} (rerun with COSCHED_TEST_SEED={seed})");
    let mut rng = util::Rng(seed);
    // A slow, sometimes failing condor_submit widens the windows in which a
    // crash leaves a batch the daemon never heard of.
    let s = Setup::new(
        |c| {
            c.submit_delay = 0.05;
            c.submit_transient_fail = 0.1;
        },
        300.0,
        "[capacity]\ngood = 6\nslow = 4\n",
    );
    let n = 120;
    let kills = 20;
    let mut ids = Vec::new();
    let mut finished_before = None;
    for kill in 0..kills {
        let mut d = s.start();
        if ids.is_empty() {
            ids.push(s.submit(&d, USER_A, n, "both.toml", None));
            ids.push(s.submit(&d, USER_B, n, "both.toml", None));
        }
        let delay = Duration::from_millis(100 + rng.below(800));
        std::thread::sleep(delay);
        let done: Vec<bool> = ids.iter().map(|&id| d.run(id)["state"] == "done").collect();
        d.kill9();
        eprintln!("seed {seed}: kill {kill}: after {delay:?}");
        if done.iter().all(|&x| x) {
            finished_before = Some(kill);
            break;
        }
    }
    assert_eq!(
        finished_before, None,
        "seed {seed}: the runs ended before {kills} crashes (make them longer)"
    );
    let before = s.successes().len();
    let queued = fake_condor::history(&s.pool).len();
    assert!(
        before > 0,
        "seed {seed}: no job finished while the daemon was being killed ({queued} queued)\n{}",
        std::fs::read_to_string(s.path("daemon.log")).unwrap_or_default()
    );
    eprintln!("seed {seed}: {before} job(s) done across the crashes");
    let d = s.start();
    d.wait_finished(&ids, &s.pool);
    s.assert_exactly_once(2, n, &format!("seed {seed}"));
}

#[test]
fn a_state_database_from_a_newer_cosched_is_refused() {
    let s = Setup::new(|_| {}, 60.0, "");
    std::fs::create_dir_all(s.path("state")).unwrap();
    let db = s.path("state/state.db");
    drop(cosched::state::Db::open(&db).expect("a database"));
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", cosched::state::SCHEMA_VERSION + 1).unwrap();
    drop(conn);
    let out = s
        .command(&["daemon", "--config", "daemon.toml"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stderr.contains("newer cosched"), "says why:\n{stderr}");
    assert!(!s.path("d.sock").exists(), "never listened");
}

/// The daemon config's keys for the in-process simulated grid, made of the
/// sites of `sim.toml`.
const SIMULATED: &str = "simulate = true\nspeedup = 50\nsites = [\"sim.toml\"]\n";

/// A daemon on the in-process simulated grid (cheap; not crash-safe).
fn simulated(extra: &str) -> Setup {
    let s = Setup::new(|_| {}, 60.0, "");
    let sites = "[simulate]\nbase_runtime = 400\n\n\
                 [[site]]\nname = \"alpha\"\nslots = 50\n[site.simulate]\nwait_mean = 10\n\n\
                 [[site]]\nname = \"beta\"\nslots = 50\n[site.simulate]\nwait_mean = 10\n";
    std::fs::write(s.path("sim.toml"), sites).unwrap();
    s.write_config(&format!("{SIMULATED}{extra}"));
    s
}

#[test]
fn sighup_reloads_capacities_without_touching_runs_and_keeps_going_on_a_broken_config() {
    let s = simulated("[capacity]\nalpha = 4\n");
    let d = s.start();
    let id = s.submit(&d, USER_A, 2000, "sim.toml", Some("bulk"));
    wait_for("the cap of 4", PATIENCE, || (site_of(&d.run(id), "alpha")["fair_cap"] == 4).then_some(()));
    s.write_config(&format!("{SIMULATED}[capacity]\nalpha = 10\n"));
    d.signal(libc::SIGHUP);
    wait_for("the cap of 10 after SIGHUP", PATIENCE, || {
        (site_of(&d.run(id), "alpha")["fair_cap"] == 10).then_some(())
    });
    assert_eq!(d.run(id)["state"], "running", "the run went on");
    std::fs::write(s.path("daemon.toml"), "this is not toml").unwrap();
    d.signal(libc::SIGHUP);
    wait_for("the reload error in the log", PATIENCE, || {
        d.log_text().contains("reload failed").then_some(())
    });
    assert_eq!(site_of(&d.run(id), "alpha")["fair_cap"], 10, "the running configuration is kept");
    assert_eq!(d.request(&json!({"op": "ping"}))["ok"], true);
}

#[test]
fn the_client_commands_work_against_a_daemon() {
    let s = simulated("");
    let d = s.start();
    let socket = s.path("d.sock");
    let socket = socket.to_str().unwrap();
    let client = |uid: u32, args: &[&str]| {
        let mut full: Vec<&str> = args.to_vec();
        full.extend_from_slice(&["--socket", socket]);
        s.command(&full).env("COSCHED_AS_UID", uid.to_string()).output().expect("the client runs")
    };
    let out = client(USER_A, &["submit", "3000", "sim.toml", "job.sub", "--daemon"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let id: u64 =
        String::from_utf8_lossy(&out.stdout).trim().parse().expect("submit --daemon prints the run id");

    let out = client(USER_A, &["status", &id.to_string(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: Value = serde_json::from_slice(&out.stdout).expect("status --json is JSON");
    let names: Vec<&str> =
        runs[0]["sites"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["alpha", "beta"]);

    let out = client(USER_A, &["runs"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.lines().any(|l| l.trim_start().starts_with(&id.to_string())), "{table}");
    let out = client(USER_B, &["runs"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("no runs"), "B sees none of A's runs");
    let out = client(USER_B, &["cancel", &id.to_string()]);
    assert_eq!(out.status.code(), Some(1), "B cannot cancel A's run");

    let out = client(USER_A, &["cancel", &id.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out = client(USER_A, &["watch", &id.to_string()]);
    assert_eq!(out.status.code(), Some(1), "watch ends when the run is cancelled");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.lines().rev().find(|l| l.starts_with("run ")).unwrap_or("").contains("cancelled"),
        "{shown}"
    );
    assert_eq!(d.run(id)["out"], 0, "a cancelled run has nothing left at the sites");
}

/// A daemon whose simulated grid (`grid.toml`, also the runs' sites file)
/// is one site of 40 slots whose file server serves 10 jobs of load 1 at
/// full speed and thrashes past that (beta 1), running jobs of 400 s; the
/// grid declares an I/O kind (load 1) and a CPU kind (load 0).
fn knee_grid(extra_site: &str) -> Setup {
    let s = Setup::new(|_| {}, 60.0, "");
    let grid = format!(
        "[simulate]\nbase_runtime = 400\njitter = 0\n[simulate.kinds]\nio = {{ load = 1.0 }}\ncpu = {{ load = 0.0 }}\n\n\
         [[site]]\nname = \"knee\"\nslots = 40\n[site.simulate]\ncapacity = 10\nbeta = 1\n{extra_site}"
    );
    std::fs::write(s.path("grid.toml"), grid).unwrap();
    s.write_config("simulate = true\nspeedup = 50\nsites = [\"grid.toml\"]\n");
    s
}

impl Setup {
    /// Submits a run of `kinds` (name, count) over `grid.toml` as `uid`.
    fn submit_kinds(&self, d: &Daemon, uid: u32, kinds: &[(&str, u64)], policy: &str) -> Result<u64, String> {
        let job_sub = std::fs::read_to_string(self.path("job.sub")).unwrap();
        let kinds: Vec<Value> = kinds
            .iter()
            .map(|(name, count)| {
                json!({"name": name, "count": count, "job_path": self.path("job.sub").display().to_string(),
                       "job_sub": job_sub})
            })
            .collect();
        let n: u64 = kinds.iter().map(|k| k["count"].as_u64().unwrap()).sum();
        let r = d.request(&json!({
            "op": "submit", "n_jobs": n, "kinds": kinds, "policy": policy,
            "sites_path": self.path("grid.toml").display().to_string(),
            "sites_toml": std::fs::read_to_string(self.path("grid.toml")).unwrap(),
            "cwd": self.dir.path().display().to_string(), "as_uid": uid,
        }));
        match r["run"].as_u64() {
            Some(id) if r["ok"] == true => Ok(id),
            _ => Err(r["error"].as_str().unwrap_or("no error given").to_string()),
        }
    }
}

impl Daemon {
    /// Waits until every run of `ids` ends; each must end `done` with every
    /// job done and none given up (the simulated grid's ledger fails a run
    /// whose jobs did not each run exactly once). Returns whether the runs
    /// ever had jobs running at the same time, and each run's `time`.
    fn wait_all_done(&self, ids: &[u64]) -> (bool, Vec<f64>) {
        let mut overlapped = false;
        let runs = wait_for("the runs to end", PATIENCE, || {
            let runs: Vec<Value> = ids.iter().map(|&id| self.run(id)).collect();
            overlapped |= runs.iter().all(|r| {
                r["sites"].as_array().is_some_and(|s| s.iter().any(|x| x["running"].as_u64() > Some(0)))
            });
            runs.iter()
                .all(|r| {
                    !matches!(r["state"].as_str(), Some("queued" | "running" | "resuming" | "cancelling"))
                })
                .then_some(runs)
        });
        for r in &runs {
            assert_eq!(r["state"], "done", "{r}\n{}", self.log_text());
            assert_eq!(r["done"], r["n_jobs"], "every job done: {r}");
            assert_eq!(r["given_up"], 0, "{r}");
        }
        (overlapped, runs.iter().map(|r| r["time"].as_f64().unwrap()).collect())
    }
}

/// Issue 55 item 2, in the daemon: runs of different kinds at one site share
/// its resource as the model says. Ten I/O jobs (load 1) alone sit at the
/// knee (L = C = 10) and take their 400 s; beside ten CPU jobs (load 0) of
/// another user, L is still 10 and they take 400 s; beside ten I/O jobs of
/// another user, L = 20 and each is slowed by D(20) = 2·(1 + 1) = 4 (1600
/// s). With a grid per run, as before, the third case took 400 s too.
#[test]
fn an_io_run_is_slowed_by_another_users_io_run_at_its_site_and_not_by_a_cpu_run() {
    let s = knee_grid("");
    let d = s.start();
    let alone = s.submit_kinds(&d, USER_A, &[("io", 10)], "bulk").unwrap();
    let (_, times) = d.wait_all_done(&[alone]);
    let t_alone = times[0];
    // 400 s of work at full speed, the fair share's first step and the
    // real time the daemon took to act, scaled 50× on a loaded machine.
    assert!((400.0..480.0).contains(&t_alone), "ten I/O jobs alone at a knee of 10: {t_alone} s");

    let io = s.submit_kinds(&d, USER_A, &[("io", 10)], "bulk").unwrap();
    let cpu = s.submit_kinds(&d, USER_B, &[("cpu", 10)], "bulk").unwrap();
    let (overlapped, times) = d.wait_all_done(&[io, cpu]);
    assert!(overlapped, "the I/O and CPU runs never ran at once");
    // Were loads not counted, L = 20 here too and the run would take 4×.
    assert!(times[0] < 1.25 * t_alone, "CPU jobs slowed the I/O run: {} s, {t_alone} s alone", times[0]);

    let io = s.submit_kinds(&d, USER_A, &[("io", 10)], "bulk").unwrap();
    let other_io = s.submit_kinds(&d, USER_B, &[("io", 10)], "bulk").unwrap();
    let (overlapped, times) = d.wait_all_done(&[io, other_io]);
    assert!(overlapped, "the two I/O runs never ran at once");
    // Slowed 4× while both run; the later one ends a little faster alone.
    for t in &times {
        assert!(
            *t > 2.5 * t_alone,
            "another user's I/O jobs did not slow this run: {t} s, {t_alone} s alone"
        );
    }
}

/// Runs of three users, of one kind and of two, with failures that make
/// jobs run again, share one grid of two sites under the default policy:
/// every run ends with each of its jobs done exactly once (the grid's
/// ledger of each run checks it and fails a run that breaks it), and the
/// runs' jobs never ran at the site more than its slots at once.
#[test]
fn runs_sharing_the_daemons_grid_each_run_every_job_exactly_once() {
    let s = knee_grid("p_fail = 0.1\nwait_mean = 20\n[[site]]\nname = \"wide\"\nslots = 30\n[site.simulate]\np_fail = 0.05\n");
    let d = s.start();
    let a = s.submit_kinds(&d, USER_A, &[("io", 40), ("cpu", 60)], "adaptive").unwrap();
    let b = s.submit_kinds(&d, USER_B, &[("io", 50)], "adaptive").unwrap();
    let c = s.submit_kinds(&d, 1003, &[("cpu", 50)], "bulk").unwrap();
    let (overlapped, _) = d.wait_all_done(&[a, b, c]);
    assert!(overlapped, "the runs never ran at once");
}

/// Kinds are declared once, in the grid: a run of a kind the grid does not
/// declare is refused, saying which and where to declare it; a site the
/// grid does not have is refused too.
#[test]
fn the_daemons_grid_refuses_a_kind_or_site_it_does_not_declare() {
    let s = knee_grid("");
    let d = s.start();
    let e = s.submit_kinds(&d, USER_A, &[("oi", 5)], "bulk").unwrap_err();
    assert!(e.contains("`oi`") && e.contains("[simulate.kinds]") && e.contains("grid.toml"), "{e}");
    // A run of one description is of the kind `job`, load 1 unless declared.
    let id = s.submit(&d, USER_A, 5, "grid.toml", Some("bulk"));
    d.wait_all_done(&[id]);
    std::fs::write(s.path("other.toml"), "[[site]]\nname = \"elsewhere\"\nslots = 5\n").unwrap();
    let r = d.request(&json!({
        "op": "submit", "n_jobs": 5, "policy": "bulk",
        "sites_path": s.path("other.toml").display().to_string(),
        "sites_toml": std::fs::read_to_string(s.path("other.toml")).unwrap(),
        "job_path": s.path("job.sub").display().to_string(),
        "job_sub": std::fs::read_to_string(s.path("job.sub")).unwrap(),
        "cwd": s.dir.path().display().to_string(), "as_uid": USER_A,
    }));
    let e = r["error"].as_str().unwrap_or_default();
    assert!(r["ok"] == false && e.contains("elsewhere") && e.contains("knee"), "{r}");
}

#[test]
fn as_uid_is_refused_unless_the_config_trusts_clients() {
    let s = simulated("");
    let text = std::fs::read_to_string(s.path("daemon.toml")).unwrap().replace("trust_client_uid = true", "");
    std::fs::write(s.path("daemon.toml"), text).unwrap();
    let d = s.start();
    let r = d.request(&json!({"op": "ping", "as_uid": USER_A}));
    assert_eq!(r["ok"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("trust_client_uid"), "{r}");
    // SAFETY: getuid cannot fail.
    let me = unsafe { libc::getuid() };
    let r = d.request(&json!({"op": "ping"}));
    assert_eq!(r["uid"], me, "the uid comes from the kernel: {r}");
}

#[test]
fn the_unit_files_pass_systemd_analyze_verify() {
    let Ok(version) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("SKIPPED: systemd-analyze is not installed (apt-get install -y systemd)");
        return;
    };
    assert!(version.status.success());
    let dir = util::tempdir();
    let runtime = dir.path().join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    let bin = util::cosched_bin();
    // verify insists that ExecStart's binary exists: point the copies at the
    // binary cargo built instead of the install location.
    for (unit, installed, user) in [
        ("cosched.service", "/usr/local/bin/cosched", false),
        ("cosched-user.service", "%h/.local/bin/cosched", true),
    ] {
        let text = std::fs::read_to_string(util::root().join("condor").join(unit)).unwrap();
        assert!(text.contains(installed), "{unit} runs {installed}");
        // systemd's stop sends SIGTERM to the daemon alone (the default,
        // control-group, sends it to every condor_submit in flight too),
        // and waits longer than the daemon gives its runs to stop.
        let setting = |key: &str| {
            let mut found = text.lines().filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='));
            let value = found.next().unwrap_or_else(|| panic!("{unit} sets {key}")).trim().to_string();
            assert!(found.next().is_none(), "{unit} sets {key} once");
            value
        };
        assert_eq!(setting("KillMode"), "mixed", "{unit}");
        let timeout = setting("TimeoutStopSec");
        let timeout: u64 = timeout
            .strip_suffix('s')
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{unit}: TimeoutStopSec={timeout}, in seconds like 60s"));
        let grace = cosched::daemon::server::STOP_GRACE.as_secs();
        assert!(timeout >= grace + 20, "{unit}: TimeoutStopSec={timeout}s leaves no margin over {grace} s");
        let copy = dir.path().join(unit);
        std::fs::write(&copy, text.replace(installed, bin.to_str().unwrap())).unwrap();
        let mut cmd = Command::new("systemd-analyze");
        if user {
            cmd.arg("--user").env("XDG_RUNTIME_DIR", &runtime);
        }
        let out = cmd.arg("verify").arg(&copy).output().unwrap();
        let said =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{unit}: systemd-analyze verify failed:\n{said}");
        let about_unit: Vec<&str> = said.lines().filter(|l| l.contains(unit)).collect();
        assert!(about_unit.is_empty(), "{unit}: systemd-analyze complains:\n{said}");
    }
}

/// systemd may stop a service the moment it says READY=1. The daemon's
/// SIGTERM handler was installed by a task that had not always run yet:
/// measured with a harness that signals on READY, 32 starts in 100 died of
/// the signal, without STOPPING=1. Ten starts here.
#[test]
fn a_sigterm_right_after_ready_stops_the_daemon_cleanly() {
    let s = simulated("");
    for attempt in 0..10 {
        let notify = s.path(&format!("notify{attempt}.sock"));
        let listener = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
        listener.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut child = s
            .command(&["daemon", "--config", "daemon.toml"])
            .env("NOTIFY_SOCKET", &notify)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut buf = [0u8; 4096];
        loop {
            let n = listener.recv(&mut buf).expect("READY=1 within 30 s");
            if buf[..n].starts_with(b"READY=1") {
                break;
            }
        }
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = wait_for("the daemon to exit", PATIENCE, || child.try_wait().unwrap());
        assert_eq!(status.code(), Some(0), "start {attempt}: {status:?} (a signal means no handler yet)");
        let mut stopping = false;
        listener.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        while let Ok(n) = listener.recv(&mut buf) {
            stopping |= buf[..n].starts_with(b"STOPPING=1");
        }
        assert!(stopping, "start {attempt}: STOPPING=1 before exit");
    }
}

#[test]
fn tells_systemd_it_is_ready_and_pings_the_watchdog() {
    let s = simulated("");
    let notify = s.path("notify.sock");
    let listener = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    listener.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let log = std::fs::File::create(s.path("daemon.log")).unwrap();
    let mut child = s
        .command(&["daemon", "--config", "daemon.toml"])
        .env("NOTIFY_SOCKET", &notify)
        .env("WATCHDOG_USEC", "200000")
        .env("JOURNAL_STREAM", "8:12345")
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !(seen.iter().any(|m: &String| m.starts_with("READY=1")) && seen.iter().any(|m| m == "WATCHDOG=1"))
    {
        let n = listener.recv(&mut buf).expect("a notification within 30 s");
        seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    let ready = seen.iter().find(|m| m.starts_with("READY=1")).unwrap();
    assert!(ready.contains("\nSTATUS=0 active run(s)"), "READY carries a one-line status: {ready:?}");
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    loop {
        let n = listener.recv(&mut buf).expect("STOPPING=1 before exit");
        if buf[..n].starts_with(b"STOPPING=1") {
            break;
        }
    }
    let status = wait_for("the daemon to exit", PATIENCE, || child.try_wait().unwrap());
    assert_eq!(status.code(), Some(0));
    let log = std::fs::read_to_string(s.path("daemon.log")).unwrap();
    assert!(log.contains("INFO"), "{log}");
    assert!(!log.contains('\x1b') && !log.contains("Z "), "no colours or timestamps for journald:\n{log}");
}

/// A1 of the daemon's exploratory test: the `[condor] bin_dir` of the sites
/// file a client sends chose the programs the daemon's account ran (its
/// `condor_submit -dry-run` at once). Now the submit is refused, saying
/// why, and none of them runs; the daemon's own tools still serve a run.
#[test]
fn a_submit_naming_other_htcondor_tools_is_refused_and_runs_none_of_them() {
    use std::os::unix::fs::PermissionsExt;
    let s = Setup::new(|_| {}, 60.0, "");
    let d = s.start();
    let evil = s.path("evil");
    std::fs::create_dir(&evil).unwrap();
    let ran = s.path("ran.txt");
    for tool in ["condor_submit", "condor_q", "condor_rm", "condor_config_val"] {
        let script = evil.join(tool);
        std::fs::write(&script, format!("#!/bin/sh\necho \"{tool} $*\" >> '{}'\nexit 0\n", ran.display()))
            .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let both = std::fs::read_to_string(s.path("both.toml")).unwrap();
    let own = format!("bin_dir = \"{}\"", s.bin.display());
    assert!(both.contains(&own), "the sites file names the pool's tools: {both}");
    std::fs::write(s.path("evil.toml"), both.replace(&own, &format!("bin_dir = \"{}\"", evil.display())))
        .unwrap();
    let r = d.request(&json!({
        "op": "submit", "n_jobs": 5,
        "sites_path": s.path("evil.toml").display().to_string(),
        "sites_toml": std::fs::read_to_string(s.path("evil.toml")).unwrap(),
        "job_path": s.path("job.sub").display().to_string(),
        "job_sub": std::fs::read_to_string(s.path("job.sub")).unwrap(),
        "cwd": s.dir.path().display().to_string(), "as_uid": USER_A,
    }));
    let error = r["error"].as_str().unwrap_or_default();
    assert_eq!(r["ok"], false, "{r}");
    assert!(error.contains(&format!("bin_dir = {}", evil.display())), "{error}");
    assert!(
        error.contains(&s.bin.display().to_string()) && error.ends_with("nothing was submitted"),
        "{error}"
    );
    assert!(
        !ran.exists(),
        "the client's programs ran: {}",
        std::fs::read_to_string(&ran).unwrap_or_default()
    );
    let id = s.submit(&d, USER_A, 4, "both.toml", Some("bulk"));
    d.wait_finished(&[id], &s.pool);
    assert!(!ran.exists());
}

/// B4 of the daemon's exploratory test: a request line that is not UTF-8
/// closed the connection without an answer, and the requests after it on
/// that connection were lost.
#[test]
fn a_request_that_is_not_utf8_is_answered_and_the_connection_goes_on() {
    let s = simulated("");
    let d = s.start();
    let mut stream = UnixStream::connect(&d.socket).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream.write_all(b"{\"op\":\"ping\",\"x\":\"\xff\"}\n{\"op\":\"ping\"}\n").unwrap();
    let mut lines = BufReader::new(stream).lines();
    let mut answer = || -> Value {
        let line = lines.next().expect("an answer").expect("a readable answer");
        serde_json::from_str(&line).unwrap()
    };
    let bad = answer();
    assert_eq!(bad["ok"], false, "{bad}");
    assert!(bad["error"].as_str().unwrap().contains("not UTF-8 (byte 19 of the line)"), "{bad}");
    let next = answer();
    assert_eq!(next["ok"], true, "the next request on the connection is served: {next}");
}

/// B2 of the daemon's exploratory test: a client that asks and never reads
/// the answers held the daemon's stop for the 30 s given to runs, and the
/// log then blamed a run.
#[test]
#[allow(clippy::disallowed_methods)] // how long the stop takes is the point
fn a_client_that_never_reads_does_not_hold_up_the_stop() {
    let s = simulated("");
    let mut d = s.start();
    let mut stuck = UnixStream::connect(&d.socket).unwrap();
    stuck.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    // Pings until the daemon stops reading them: its answers to us fill the
    // socket, so its write waits on us.
    let pings = "{\"op\":\"ping\"}\n".repeat(100_000);
    let stopped_reading = stuck.write_all(pings.as_bytes()).expect_err("the daemon read 1.4 MB of pings");
    assert!(
        matches!(stopped_reading.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        "{stopped_reading}"
    );
    let asked = Instant::now();
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(), Some(0), "{}", d.log_text());
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(10), "the stop took {took:?}:\n{}", d.log_text());
    assert!(!d.log_text().contains("still busy"), "{}", d.log_text());
    drop(stuck);
}

/// The client's exit status when the daemon refuses a submit: nothing was
/// submitted, so it is the input error's (2), as when the client finds
/// the error itself, not 1 (a run whose jobs failed).
#[test]
fn a_submit_the_daemon_refuses_exits_2() {
    let s = simulated("");
    let d = s.start();
    std::fs::write(s.path("other.toml"), "[[site]]\nname = \"elsewhere\"\nslots = 5\n").unwrap();
    let out = s
        .command(&["submit", "5", "other.toml", "job.sub", "--daemon"])
        .env("COSCHED_SOCKET", &d.socket)
        .output()
        .expect("the client runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stderr.contains("elsewhere"), "the daemon's reason is shown:\n{stderr}");
    assert_eq!(d.request(&json!({"op": "runs"}))["runs"], json!([]), "nothing was recorded");
}

/// The daemon submits as its own account, which reads the files the jobs
/// take from the submit host: a user could name in a description a file
/// only that account may read (another user's, the daemon's state), and
/// HTCondor would ship it with the job. The caller must be able to read
/// each such file themselves.
#[test]
fn a_submit_naming_an_input_its_user_cannot_read_is_refused() {
    const NOBODY: u32 = 65534;
    let chmod =
        |p: &std::path::Path, mode| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
    let s = Setup::new(|_| {}, 60.0, "");
    let secret = s.path("secret.txt");
    std::fs::write(&secret, "the owner's alone\n").unwrap();
    chmod(&secret, 0o600).unwrap();
    let job =
        std::fs::read_to_string(s.path("job.sub")).unwrap().replace("queue", "input = secret.txt\nqueue");
    let d = s.start();
    let submit = || {
        d.request(&json!({
            "op": "submit", "n_jobs": 2, "policy": "bulk",
            "sites_path": s.path("good.toml").display().to_string(),
            "sites_toml": std::fs::read_to_string(s.path("good.toml")).unwrap(),
            "job_path": s.path("secret.sub").display().to_string(),
            "job_sub": job,
            "as_uid": NOBODY,
        }))
    };
    let r = submit();
    let error = r["error"].as_str().unwrap_or_default();
    assert_eq!(r["ok"], false, "a file of mode 0600 was taken for uid {NOBODY}: {r}");
    let named = format!("`input` names `{}`: uid {NOBODY}", secret.display());
    assert!(error.contains(&named) && error.contains("cannot read"), "names the file and the user: {error}");
    assert!(error.contains("make it readable by you"), "says what to do: {error}");
    assert!(error.ends_with("nothing was submitted"), "{error}");
    assert_eq!(d.request(&json!({"op": "runs"}))["runs"], json!([]), "nothing was recorded");

    chmod(&secret, 0o644).unwrap();
    let r = submit();
    assert_eq!(r["ok"], true, "a file anyone may read is taken: {r}");
    d.wait_finished(&[r["run"].as_u64().expect("a run id")], &s.pool);
}

/// The foreground `cosched submit` exits at once on a second Ctrl-C; the
/// daemon waited out its whole stop grace (30 s) whatever it was sent
/// meanwhile. Here the stop waits on a `condor_submit` that takes an hour.
#[test]
#[allow(clippy::disallowed_methods)] // how long the exit takes is the point
fn a_second_sigterm_while_stopping_exits_at_once() {
    let s = Setup::new(|c| c.submit_delay = 3600.0, 60.0, "");
    let mut d = s.start();
    s.submit(&d, USER_A, 4, "good.toml", Some("bulk"));
    // Its jobs are queued before the fake condor_submit's delay: from here
    // the run's site task waits on it, and so does a stop.
    wait_for("a condor_submit to queue its jobs", PATIENCE, || {
        fake_condor::history(&s.pool).iter().any(|r| r.status == HistoryStatus::Queued).then_some(())
    });
    d.signal(libc::SIGTERM);
    wait_for("the daemon to begin its stop", PATIENCE, || {
        d.log_text().contains("SIGTERM: stopping").then_some(())
    });
    let asked = Instant::now();
    d.signal(libc::SIGTERM);
    let code = d.wait_exit();
    let took = asked.elapsed();
    let log = d.log_text();
    assert_eq!(code, Some(3), "exits as interrupted, after {took:?}:\n{log}");
    assert!(took < Duration::from_secs(10), "the exit took {took:?}:\n{log}");
    assert!(log.contains("resume from their checkpoints at the next start"), "{log}");
}

/// After an upgrade, a new client against the old daemon got "missing
/// field `cwd`" and no word of versions: the daemon now says its version
/// on every answer, and what it cannot read of a request.
#[test]
fn the_daemon_says_its_version_and_the_field_of_a_request_it_cannot_read() {
    let s = simulated("");
    let d = s.start();
    let version = d.request(&json!({"op": "ping"}))["version"].as_str().map(str::to_string);
    let out = s.command(&["--version"]).output().expect("cosched --version runs");
    let own = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.as_ref().is_some_and(|v| own.trim() == format!("cosched {v}")),
        "the daemon says {version:?}; `cosched --version` says {own}"
    );
    let r = d.request(&json!({"op": "cancel", "run": "seven", "version": "0.0.1 (old)"}));
    let error = r["error"].as_str().unwrap_or_default();
    assert_eq!(r["ok"], false, "{r}");
    assert!(error.contains("(field `run`)"), "names the field: {error}");
    assert!(
        error.contains("the client is cosched 0.0.1 (old)") && error.contains("systemctl restart"),
        "{error}"
    );
}
