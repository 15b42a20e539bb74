//! Daemon soak: `cosched daemon` with 20 concurrent runs (5 users) on 50
//! simulated sites for an hour of simulated time. Samples the daemon's RSS and
//! the latency of `status` (every run, every site) throughout; a finished run
//! is replaced at once so that 20 are always running (churn is where leaks
//! show). Baselines measured in the same run: the RSS of the first sample and
//! the `status` latency of the idle daemon before any run.
//!
//!   cargo bench --bench daemon_soak                     # 60 simulated minutes at 30×: 2 real minutes
//!   cargo bench --bench daemon_soak -- --minutes 10     # shorter
//!
//! Uses the in-process simulated grid (`simulate = true`, the sites file
//! named in the daemon config): one model per site that every run's jobs
//! share, 1000 site tasks of the runs' engines and one driver per site in
//! one process, no HTCondor processes.

// A benchmark measures real time: latencies and a wall-clock duration.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 20;
const USERS: u32 = 5;
const SITES: usize = 50;
const JOBS_PER_RUN: u64 = 150;

struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    fn connect(socket: &Path) -> Option<Client> {
        let s = UnixStream::connect(socket).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
        Some(Client { writer: s.try_clone().ok()?, reader: BufReader::new(s) })
    }
    fn request(&mut self, req: &serde_json::Value) -> serde_json::Value {
        writeln!(self.writer, "{req}").expect("send");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("answer");
        serde_json::from_str(&line).expect("JSON answer")
    }
    /// Round trip of one `status` of everything, seconds.
    fn timed_status(&mut self) -> (f64, serde_json::Value) {
        let t = Instant::now();
        let r = self.request(&serde_json::json!({"op": "status"}));
        (t.elapsed().as_secs_f64(), r)
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The nearest-rank `p` quantile ([`cosched::stats`]); NaN for none.
fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_unstable_by(f64::total_cmp);
    cosched::stats::nearest_rank(samples, p).unwrap_or(f64::NAN)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: f64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let minutes = arg("--minutes", 60.0);
    let speedup = arg("--speedup", 30.0);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut sites = String::from("[simulate]\nbase_runtime = 400\njitter = 0.2\n\n");
    let mut capacity = String::from("[capacity]\n");
    for i in 0..SITES {
        let slots = 40 + (i * 37) % 160;
        let knee = 10 + (i * 13) % 60;
        let wait = 10 + (i * 29) % 300;
        sites.push_str(&format!(
            "[[site]]\nname = \"s{i:02}\"\nslots = {slots}\n[site.simulate]\nwait_mean = {wait}\ncapacity = {knee}\n\
             beta = 0.5\nspeed = {:.2}\np_fail = 0.01\n\n",
            0.7 + (i % 7) as f64 * 0.1
        ));
        capacity.push_str(&format!("s{i:02} = {}\n", slots / 2));
    }
    std::fs::write(dir.path().join("sites.toml"), &sites).unwrap();
    std::fs::write(dir.path().join("job.sub"), "executable = /bin/true\nqueue\n").unwrap();
    std::fs::write(
        dir.path().join("daemon.toml"),
        format!("socket = \"d.sock\"\nstate_dir = \"state\"\nsimulate = true\nspeedup = {speedup}\nsites = [\"sites.toml\"]\ntrust_client_uid = true\n{capacity}"),
    )
    .unwrap();
    let socket = dir.path().join("d.sock");
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(["daemon", "--config", "daemon.toml"])
        .current_dir(dir.path())
        .env("COSCHED_LOG", "warn")
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .spawn()
        .expect("the daemon starts");
    let pid = daemon.id();
    let start = Instant::now();
    let mut client = loop {
        if let Some(c) = Client::connect(&socket) {
            break c;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the daemon did not come up");
        std::thread::sleep(Duration::from_millis(20));
    };

    // Baseline: status of an idle daemon.
    let mut idle: Vec<f64> = (0..200).map(|_| client.timed_status().0).collect();
    let idle_p99 = percentile(&mut idle, 0.99);

    let submit = |client: &mut Client, k: usize| {
        let r = client.request(&serde_json::json!({
            "op": "submit", "n_jobs": JOBS_PER_RUN,
            "sites_path": dir.path().join("sites.toml").display().to_string(), "sites_toml": sites,
            "job_path": dir.path().join("job.sub").display().to_string(), "job_sub": "executable = /bin/true\nqueue\n",
            "cwd": dir.path().display().to_string(), "as_uid": 2000 + (k as u32 % USERS),
        }));
        assert_eq!(r["ok"], true, "submit: {r}");
    };
    let mut submitted = 0;
    for _ in 0..RUNS {
        submit(&mut client, submitted);
        submitted += 1;
    }

    let real_total = Duration::from_secs_f64(minutes * 60.0 / speedup);
    let window = real_total / 12;
    let soak_start = Instant::now();
    println!("daemon soak: {RUNS} runs × {SITES} sites, {minutes} simulated minutes at {speedup}× ({real_total:?} real)");
    println!(
        "{:>9} {:>9} {:>6} {:>9} {:>9} {:>9} {:>9}",
        "sim min", "RSS MiB", "runs", "done", "p50 ms", "p99 ms", "max ms"
    );
    let mut first_rss = None;
    let mut last_rss = 0;
    let mut worst_p99: f64 = 0.0;
    let mut next_report = soak_start + window;
    let mut lat = Vec::new();
    let mut done_total = 0u64;
    while soak_start.elapsed() < real_total {
        let (t, r) = client.timed_status();
        lat.push(t);
        let runs = r["runs"].as_array().cloned().unwrap_or_default();
        // Keep RUNS runs going: replace the ones that finished.
        for _ in runs.len()..RUNS {
            submit(&mut client, submitted);
            submitted += 1;
        }
        if Instant::now() >= next_report {
            let all = client.request(&serde_json::json!({"op": "runs"}));
            done_total = all["runs"]
                .as_array()
                .map_or(0, |rs| rs.iter().map(|r| r["done"].as_u64().unwrap_or(0)).sum());
            let rss = rss_kib(pid);
            first_rss.get_or_insert(rss);
            last_rss = rss;
            let (p50, p99, max) =
                (percentile(&mut lat, 0.5), percentile(&mut lat, 0.99), percentile(&mut lat, 1.0));
            worst_p99 = worst_p99.max(p99);
            println!(
                "{:>9.1} {:>9.1} {:>6} {:>9} {:>9.2} {:>9.2} {:>9.2}",
                soak_start.elapsed().as_secs_f64() * speedup / 60.0,
                rss as f64 / 1024.0,
                runs.len(),
                done_total,
                p50 * 1e3,
                p99 * 1e3,
                max * 1e3
            );
            lat.clear();
            next_report += window;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let first = first_rss.unwrap_or(1).max(1);
    println!(
        "RSS last/first sample: {:.2} ({:.1} → {:.1} MiB); status p99 worst window {:.2} ms vs idle daemon {:.2} ms ({:.1}×); \
         {submitted} runs submitted, {done_total} jobs done by the runs still listed",
        last_rss as f64 / first as f64,
        first as f64 / 1024.0,
        last_rss as f64 / 1024.0,
        worst_p99 * 1e3,
        idle_p99 * 1e3,
        worst_p99 / idle_p99
    );
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let _ = daemon.wait();
}
