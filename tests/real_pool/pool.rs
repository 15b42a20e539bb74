//! One real HTCondor pool for the whole suite (`../shared/htcondor/pool.sh`),
//! and the helpers every case uses to drive cosched on it as the pool's job
//! owner and to read what HTCondor and the jobs themselves say happened.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The pool, started once; stopped (and its directory removed) when dropped.
pub struct Pool {
    pub dir: PathBuf,
    pub port: u16,
    /// Slots of the pool's one partitionable slot (`COSCHED_POOL_CPUS`).
    pub cpus: u32,
    /// `condor personal@HOST 127.0.0.1:PORT`: Condor-C to the pool itself.
    pub grid_resource: String,
    /// A directory owned by the job user; every case works under it.
    pub home: PathBuf,
    condor_config: PathBuf,
    path: String,
    uid: u32,
    gid: u32,
    /// cosched, copied where the job user can run it.
    pub cosched: PathBuf,
}

fn pool_sh() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/htcondor/pool.sh")
}

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("local address").port()
}

fn id_of(user: &str, flag: &str) -> Result<u32, String> {
    let out = Command::new("id").args([flag, user]).output().map_err(|e| format!("id: {e}"))?;
    String::from_utf8_lossy(&out.stdout).trim().parse().map_err(|_| format!("no user {user}"))
}

impl Pool {
    /// Starts a pool of `cpus` slots in a fresh directory under /var/tmp
    /// (HTCondor holds jobs whose directories are under /tmp).
    pub fn start(cpus: u32) -> Result<Pool, String> {
        // SAFETY: geteuid cannot fail and touches no memory.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root: pool.sh must create the accounts condor and cosched-test".into());
        }
        let script = pool_sh();
        if !script.exists() {
            return Err(format!("{} is missing", script.display()));
        }
        let port = free_port();
        let dir = PathBuf::from(format!("/var/tmp/cosched-real-pool-{}-{port}", std::process::id()));
        let out = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg(&dir)
            .arg(port.to_string())
            .env("COSCHED_POOL_CPUS", cpus.to_string())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run pool.sh: {e}"))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!(
                "pool.sh start failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let exports = String::from_utf8_lossy(&out.stdout).into_owned();
        let value = |name: &str| -> Option<String> {
            exports.split(['\n', ' ']).find_map(|w| {
                let rest = w.strip_prefix(&format!("{name}="))?;
                Some(rest.trim_matches('\'').to_string())
            })
        };
        let grid_resource = exports
            .lines()
            .find_map(|l| l.strip_prefix("export COSCHED_TEST_GRID_RESOURCE="))
            .map(|v| v.trim_matches('\'').to_string())
            .ok_or("pool.sh printed no COSCHED_TEST_GRID_RESOURCE")?;
        let condor_config = PathBuf::from(value("CONDOR_CONFIG").ok_or("no CONDOR_CONFIG")?);
        let home = PathBuf::from(value("COSCHED_TEST_HOME").ok_or("no COSCHED_TEST_HOME")?);
        let path = format!(
            "{d}/release/bin:{d}/release/sbin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            d = dir.display()
        );
        let uid = id_of("cosched-test", "-u")?;
        let gid = id_of("cosched-test", "-g")?;
        let cosched = home.join("cosched");
        std::fs::copy(env!("CARGO_BIN_EXE_cosched"), &cosched).map_err(|e| format!("copy cosched: {e}"))?;
        std::os::unix::fs::chown(&cosched, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
        Ok(Pool { dir, port, cpus, grid_resource, home, condor_config, path, uid, gid, cosched })
    }

    /// A `grid_resource` at a schedd that does not exist.
    pub fn dead_grid_resource(&self) -> String {
        format!("condor nobody@nowhere 127.0.0.1:{}", free_port())
    }

    /// An HTCondor command as root (queries and administration).
    pub fn condor(&self, program: &str, args: &[&str]) -> Output {
        Command::new(program)
            .args(args)
            .env("CONDOR_CONFIG", &self.condor_config)
            .env("PATH", &self.path)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    /// `condor_q -all -json -constraint EXPR -attributes A…` as root.
    pub fn query(&self, constraint: &str, attributes: &str) -> Vec<serde_json::Value> {
        let out =
            self.condor("condor_q", &["-all", "-json", "-constraint", constraint, "-attributes", attributes]);
        assert!(out.status.success(), "condor_q: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        if text.trim().is_empty() {
            return Vec::new();
        }
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("condor_q -json: {e}: {text}"))
    }

    /// A command run as the job user, in `dir`, with the pool's environment.
    pub fn user_command(&self, program: &Path, dir: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(dir)
            .env_clear()
            .env("CONDOR_CONFIG", &self.condor_config)
            .env("PATH", &self.path)
            .env("HOME", dir)
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .uid(self.uid)
            .gid(self.gid);
        cmd
    }

    /// Makes `path` (a file or directory) the job user's.
    pub fn give(&self, path: &Path) {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid)).unwrap();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let out =
            Command::new("bash").arg(pool_sh()).arg("stop").arg(&self.dir).stdin(Stdio::null()).output();
        match out {
            // Kept on request, to read the cases' user logs, ledgers and
            // run directories after the suite.
            Ok(o)
                if o.status.success() && std::env::var("COSCHED_REAL_POOL_KEEP").is_ok_and(|v| v == "1") =>
            {
                println!("real-pool suite: pool directory kept: {}", self.dir.display());
            }
            Ok(o) if o.status.success() => {
                let _ = std::fs::remove_dir_all(&self.dir);
            }
            Ok(o) => eprintln!(
                "real-pool suite: pool.sh stop {} failed: {}",
                self.dir.display(),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => eprintln!("real-pool suite: cannot run pool.sh stop: {e}"),
        }
    }
}

/// The sleep job every case submits: it appends `start I PID` and `end I PID`
/// to the case's ledger around a sleep of 5–15 s (from its index), and prints
/// `job I` to its output. Counting ledger lines counts executions.
pub const JOB_SH: &str = "#!/bin/sh\n\
# job.sh INDEX LEDGER: a 5-15 s sleep that records its start and its end.\n\
echo \"start $1 $$\" >> \"$2\"\n\
sleep $((5 + ($1 * 7) % 11))\n\
echo \"end $1 $$\" >> \"$2\"\n\
echo \"job $1\"\n";

/// One case's directory under the pool's home, with its job and ledger.
pub struct Case<'a> {
    pub pool: &'a Pool,
    pub name: String,
    pub dir: PathBuf,
}

impl<'a> Case<'a> {
    pub fn new(pool: &'a Pool, name: &str) -> Case<'a> {
        let dir = pool.home.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        pool.give(&dir);
        let case = Case { pool, name: name.to_string(), dir };
        case.write("job.sh", JOB_SH);
        std::fs::set_permissions(case.path("job.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        case.write("ledger", "");
        case.write_job("");
        case
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes a file the job user owns.
    pub fn write(&self, name: &str, text: &str) {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        self.pool.give(&path);
    }

    /// `job.sub`: the sleep job with file transfer, plus `extra` commands.
    pub fn write_job(&self, extra: &str) {
        self.write(
            "job.sub",
            &format!(
                "executable = job.sh\narguments = $(CoschedJob) {}\noutput = out.$(CoschedJob)\n\
                 error = err.$(CoschedJob)\nshould_transfer_files = YES\nwhen_to_transfer_output = ON_EXIT\n{extra}queue\n",
                self.path("ledger").display()
            ),
        );
    }

    /// `sites.toml` from `[[site]]` bodies.
    pub fn write_sites(&self, preamble: &str, sites: &[(&str, Option<&str>, &str)]) {
        let mut text = preamble.to_string();
        for (name, grid, extra) in sites {
            text.push_str(&format!("\n[[site]]\nname = \"{name}\"\n"));
            if let Some(grid) = grid {
                text.push_str(&format!("grid_resource = \"{grid}\"\n"));
            }
            text.push_str(extra);
        }
        self.write("sites.toml", &text);
    }

    /// cosched ARGS as the job user in this case's directory.
    pub fn cosched(&self, args: &[&str]) -> Command {
        let mut cmd = self.pool.user_command(&self.pool.cosched, &self.dir);
        cmd.args(args);
        cmd
    }

    /// Runs cosched to the end, killing it after `patience`.
    pub fn run(&self, args: &[&str], patience: Duration) -> Output {
        let child = self
            .cosched(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: cannot start cosched: {e}", self.name));
        wait_bounded_or(child, patience, &format!("{}: cosched {}", self.name, args.join(" ")), || {
            self.what_is_left()
        })
    }

    /// What a run that would not end left behind, for its failure message:
    /// the pool's queue, and the end of each user log of the case.
    /// Never panics: it runs inside a failure message (a schedd stopped by
    /// the case is reported as such, not in place of that message).
    fn what_is_left(&self) -> String {
        let runs: Vec<PathBuf> = std::fs::read_dir(self.path("st/runs"))
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|run| run.path())
            .collect();
        // This case's jobs (and their Condor-C copies), not the other cases'.
        let ours = runs
            .iter()
            .filter_map(|run| run.file_name())
            .map(|id| format!("CoschedRun == \"{}\"", id.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" || ");
        let attributes =
            "ClusterId,ProcId,JobStatus,HoldReason,GridJobId,GridJobStatus,CoschedRun,CoschedJob";
        let constraint = if ours.is_empty() { "true".to_string() } else { ours };
        let queue = self
            .pool
            .condor("condor_q", &["-all", "-json", "-constraint", &constraint, "-attributes", attributes]);
        let stdout = String::from_utf8_lossy(&queue.stdout);
        let shown = match serde_json::from_str::<Vec<serde_json::Value>>(&stdout) {
            Ok(ads) => ads.iter().map(|ad| ad.to_string()).collect::<Vec<_>>().join("\n"),
            Err(_) => format!("{}{}", stdout.trim(), String::from_utf8_lossy(&queue.stderr).trim()),
        };
        let mut text = format!("the pool's queue ({constraint}):\n{shown}\n");
        let mut logs: Vec<PathBuf> = runs
            .iter()
            .flat_map(|run| std::fs::read_dir(run).into_iter().flatten().filter_map(Result::ok))
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "log"))
            .collect();
        logs.sort();
        for log in logs {
            let body = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = body.lines().collect();
            let tail = lines[lines.len().saturating_sub(60)..].join("\n");
            text.push_str(&format!("the last lines of {}:\n{tail}\n", log.display()));
        }
        text
    }

    /// What the ledger says: per job index, (executions started, executions
    /// ended), and the executions cut short (started, never ended).
    pub fn ledger(&self) -> Ledger {
        let text = std::fs::read_to_string(self.path("ledger")).unwrap_or_default();
        let mut by_pid: BTreeMap<(u64, String), (u32, u32)> = BTreeMap::new();
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let [what, index, pid] = words[..] else { panic!("{}: ledger line {line:?}", self.name) };
            let index: u64 = index.parse().unwrap();
            let e = by_pid.entry((index, pid.to_string())).or_default();
            match what {
                "start" => e.0 += 1,
                "end" => e.1 += 1,
                _ => panic!("{}: ledger line {line:?}", self.name),
            }
        }
        let mut ledger = Ledger::default();
        for ((index, _), (started, ended)) in by_pid {
            let e = ledger.jobs.entry(index).or_default();
            e.0 += started;
            e.1 += ended;
            if ended == 0 {
                ledger.cut_short += 1;
            }
        }
        ledger
    }

    /// Every job 0..n ran to completion exactly once; returns the ledger.
    pub fn assert_each_completed_once(&self, n: u64) -> Ledger {
        let ledger = self.ledger();
        let missing: Vec<u64> = (0..n).filter(|i| ledger.ended(*i) == 0).collect();
        let twice: Vec<u64> = (0..n).filter(|i| ledger.ended(*i) > 1).collect();
        assert!(missing.is_empty(), "{}: jobs that never completed: {missing:?}", self.name);
        assert!(
            twice.is_empty(),
            "{}: jobs completed more than once: {twice:?}\nledger:\n{}\n{}",
            self.name,
            std::fs::read_to_string(self.path("ledger")).unwrap_or_default(),
            self.user_logs()
        );
        self.assert_only_jobs_below_ran_and_wrote_their_output(n, &ledger);
        ledger
    }

    fn assert_only_jobs_below_ran_and_wrote_their_output(&self, n: u64, ledger: &Ledger) {
        assert!(
            ledger.jobs.keys().all(|i| *i < n),
            "{}: executions of jobs beyond N: {:?}",
            self.name,
            ledger.jobs.keys().filter(|i| **i >= n).collect::<Vec<_>>()
        );
        for i in 0..n {
            let out = std::fs::read_to_string(self.path(&format!("out.{i}"))).unwrap_or_default();
            assert_eq!(out.trim(), format!("job {i}"), "{}: out.{i}", self.name);
        }
    }

    /// How many times each job was sent to `site`, and held there (user-log
    /// 012 events), by the submitted batches of the case's state database
    /// (`st/state.db`): a batch's cluster and the position of a proc in it
    /// name the job.
    pub fn sent_and_held_at(&self, site: &str) -> (BTreeMap<u64, u32>, BTreeMap<u64, u32>) {
        let batches: BTreeMap<i64, Vec<u64>> =
            submitted_batches(&self.path("st/state.db"), Some(site)).into_iter().collect();
        let mut sent: BTreeMap<u64, u32> = BTreeMap::new();
        for job in batches.values().flatten() {
            *sent.entry(*job).or_default() += 1;
        }
        let mut held: BTreeMap<u64, u32> = BTreeMap::new();
        for log in self.user_log_paths() {
            let (events, _) = cosched::userlog::parse_bytes(&std::fs::read(&log).unwrap_or_default());
            for e in events.iter().filter(|e| e.code == 12) {
                if let Some(&job) = batches.get(&e.cluster).and_then(|jobs| jobs.get(e.proc as usize)) {
                    *held.entry(job).or_default() += 1;
                }
            }
        }
        (sent, held)
    }

    /// For a case that stops the schedd: every job 0..n completed, and
    /// cosched sent each exactly once. A stopped schedd that never recorded
    /// a job's end runs that job again when it is back (HTCondor's
    /// at-least-once execution), in the same cluster.proc: a second
    /// completion is then HTCondor's, and is printed, not failed. cosched's
    /// duplicates are what fails: a job in two submitted batches of the
    /// state database (`state_db`) where more than one of them was not
    /// withdrawn before it started (the policy takes idle jobs back when a
    /// window drops, and sends them again: one attempt, aborted by 009 with
    /// no 001, is no duplicate), or a cluster in a user log that no batch
    /// recorded (a `condor_submit` that succeeded unseen and was retried).
    pub fn assert_each_sent_once_and_completed(&self, n: u64, state_db: &Path) -> Ledger {
        let ledger = self.ledger();
        let missing: Vec<u64> = (0..n).filter(|i| ledger.ended(*i) == 0).collect();
        assert!(missing.is_empty(), "{}: jobs that never completed: {missing:?}", self.name);
        let batches = submitted_batches(state_db, None);
        use std::collections::BTreeSet;
        let mut logged: BTreeSet<i64> = BTreeSet::new();
        let mut started: BTreeSet<(i64, i64)> = BTreeSet::new();
        let mut aborted: BTreeSet<(i64, i64)> = BTreeSet::new();
        for log in self.user_log_paths() {
            let (events, _) = cosched::userlog::parse_bytes(&std::fs::read(&log).unwrap_or_default());
            for e in &events {
                match e.code {
                    0 => logged.extend([e.cluster]),
                    1 => started.extend([(e.cluster, e.proc)]),
                    9 => aborted.extend([(e.cluster, e.proc)]),
                    _ => {}
                }
            }
        }
        let mut sent: BTreeMap<u64, u32> = BTreeMap::new();
        let mut withdrawn: BTreeMap<u64, u32> = BTreeMap::new();
        for (cluster, jobs) in &batches {
            for (proc, job) in jobs.iter().enumerate() {
                let at = (*cluster, proc as i64);
                if aborted.contains(&at) && !started.contains(&at) {
                    *withdrawn.entry(*job).or_default() += 1;
                } else {
                    *sent.entry(*job).or_default() += 1;
                }
            }
        }
        let sent_twice: Vec<(&u64, &u32)> = sent.iter().filter(|(_, times)| **times > 1).collect();
        assert!(
            sent_twice.is_empty(),
            "{}: jobs sent in more than one batch not withdrawn unstarted: {sent_twice:?}",
            self.name
        );
        if !withdrawn.is_empty() {
            println!("{}: jobs withdrawn before they started and sent again: {withdrawn:?}", self.name);
        }
        let recorded: BTreeSet<i64> = batches.iter().map(|(cluster, _)| *cluster).collect();
        let unrecorded: Vec<&i64> = logged.difference(&recorded).collect();
        assert!(
            unrecorded.is_empty(),
            "{}: clusters in the user logs that no batch recorded: {unrecorded:?}\n{}",
            self.name,
            self.user_logs()
        );
        self.assert_only_jobs_below_ran_and_wrote_their_output(n, &ledger);
        let rerun: Vec<u64> = (0..n).filter(|i| ledger.ended(*i) > 1).collect();
        if !rerun.is_empty() {
            println!(
                "{}: jobs HTCondor ran to completion again after the outage (each sent once): {rerun:?}",
                self.name
            );
        }
        ledger
    }

    /// Every HTCondor user log under the case's directory.
    fn user_log_paths(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "log") {
                    out.push(path);
                }
            }
        }
        let mut logs = Vec::new();
        walk(&self.dir, &mut logs);
        logs.sort();
        logs
    }

    /// Every user log's text, for a failure message: what HTCondor said
    /// happened (evictions, restarts) is what tells a job run twice by
    /// HTCondor from one cosched sent twice.
    fn user_logs(&self) -> String {
        self.user_log_paths()
            .iter()
            .map(|p| format!("--- {}\n{}", p.display(), std::fs::read_to_string(p).unwrap_or_default()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The run's own jobs still idle, running or held in the queue (found by
    /// the clusters its state database recorded), and any held copy at all
    /// left behind by Condor-C for them.
    pub fn assert_nothing_left(&self, run: &str) {
        let left = self.left(run);
        assert!(left.is_empty(), "{}: jobs of run {run} left in the queue: {left:?}", self.name);
    }

    /// The run's jobs, local or forwarded copies, neither completed nor removed.
    pub fn left(&self, run: &str) -> Vec<serde_json::Value> {
        self.pool.query(
            &format!("CoschedRun == \"{run}\" && JobStatus != 4 && JobStatus != 3"),
            "ClusterId,ProcId,JobStatus,HoldReason,SubmitterGlobalJobId",
        )
    }
}

/// Executions per job index, from a case's ledger.
#[derive(Debug, Default)]
pub struct Ledger {
    /// index → (started, ended)
    pub jobs: BTreeMap<u64, (u32, u32)>,
    /// Executions that started and never ended.
    pub cut_short: u32,
}

impl Ledger {
    pub fn ended(&self, index: u64) -> u32 {
        self.jobs.get(&index).map_or(0, |e| e.1)
    }
    pub fn executions(&self) -> u32 {
        self.jobs.values().map(|e| e.0).sum()
    }
}

/// The submitted batches of a state database (of `site` only, if given):
/// each one's cluster and its jobs, in the order of its procs.
fn submitted_batches(state_db: &Path, site: Option<&str>) -> Vec<(i64, Vec<u64>)> {
    let db = rusqlite::Connection::open(state_db).unwrap();
    let mut statement = db
        .prepare(
            "SELECT cluster, jobs FROM submissions WHERE state = 'submitted' AND (?1 IS NULL OR site = ?1)",
        )
        .unwrap();
    statement
        .query_map([site], |row| {
            let jobs: String = row.get(1)?;
            Ok((row.get(0)?, serde_json::from_str(&jobs).expect("a batch's jobs are a JSON list")))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Waits for `child` at most `patience`; kills it and fails the case after.
pub fn wait_bounded(child: Child, patience: Duration, what: &str) -> Output {
    wait_bounded_or(child, patience, what, String::new)
}

/// [`wait_bounded`], with `left()` describing what the child left behind
/// in the failure message.
fn wait_bounded_or(
    mut child: Child,
    patience: Duration,
    what: &str,
    left: impl FnOnce() -> String,
) -> Output {
    let deadline = Instant::now() + patience;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return child.wait_with_output().expect("output"),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            _ => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("output");
                panic!(
                    "{what}: still running after {patience:?}; killed.\nstderr:\n{}\n{}",
                    String::from_utf8_lossy(&out.stderr),
                    left()
                );
            }
        }
    }
}

/// Polls `probe` every 500 ms until it answers, at most `patience`.
pub fn eventually<T>(what: &str, patience: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + patience;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {patience:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `--json` summary cosched printed on stdout.
pub fn summary(out: &Output, context: &str) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{context}: no JSON summary ({e}); stdout:\n{}\nstderr:\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}
