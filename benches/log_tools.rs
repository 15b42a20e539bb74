//! The `cosched log` commands on big logs (`cargo bench --bench log_tools`):
//! peak memory and speed against HTCondor's own reader, same file, same run.
//!
//! 1. Builds a log from the event shapes of `../shared/fixtures/userlogs`:
//!    the real logs again and again, each copy with fresh cluster numbers and
//!    its time stamps a minute later than the previous copy's, so that the
//!    log has as many distinct jobs as a real log of its size (about one per
//!    1.6 KB) and spans hours to days.
//! 2. Runs `cosched log stats`, `log dump` and `log report` on it as child
//!    processes (the release binary), and reads each one's peak RSS from
//!    `wait4`'s resource usage, with its wall and CPU time.
//! 3. Times HTCondor's reader (`../shared/tools/ref_userlog.py time FILE 1`,
//!    `pip install htcondor`) on the same file and prints the ratio to
//!    `log stats`, by wall time and by CPU time (the machine is shared: CPU
//!    time is what load changes least).
//!
//! Arguments after `--`: `--mb N` (default 200; several allowed, e.g.
//! `--mb 200 --mb 2000`), `--no-reference` to skip HTCondor's reader (it
//! takes some 80 s per GB).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("shared")
}

/// The event blocks of the shared fixtures, in file order.
fn fixture_blocks() -> Vec<String> {
    let dir = shared().join("fixtures/userlogs");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("../shared/fixtures/userlogs")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    let mut blocks = Vec::new();
    for log in logs {
        let mut block = String::new();
        for line in std::fs::read_to_string(&log).unwrap().split_inclusive('\n') {
            block.push_str(line);
            if line.trim_end() == "..." {
                blocks.push(std::mem::take(&mut block));
            }
        }
    }
    blocks
}

/// `block` with `cluster` and its stamp `shift` seconds later, in the form
/// it was written in (ISO with optional fraction and `Z`, or legacy `MM/DD`).
fn shifted(block: &str, cluster: i64, shift: i64) -> String {
    let open = block.find('(').unwrap();
    let dot = open + block[open..].find('.').unwrap();
    let stamp_at = open + block[open..].find(") ").unwrap() + 2;
    let legacy = block.as_bytes()[stamp_at + 2] == b'/';
    // Legacy stamps carry no year: any year will do for adding seconds.
    let (len, format, read_as) = if legacy {
        (14, "%m/%d %H:%M:%S", format!("2026/{}", &block[stamp_at..stamp_at + 14]))
    } else {
        (19, "%Y-%m-%d %H:%M:%S", block[stamp_at..stamp_at + 19].to_string())
    };
    let read_format = if legacy { "%Y/%m/%d %H:%M:%S" } else { format };
    let stamp = chrono::NaiveDateTime::parse_from_str(&read_as, read_format)
        .unwrap_or_else(|e| panic!("{read_as}: {e}"));
    let later = (stamp + chrono::Duration::seconds(shift)).format(format);
    format!("{}{cluster:03}{}{later}{}", &block[..=open], &block[dot..stamp_at], &block[stamp_at + len..])
}

/// Writes a log of at least `bytes` bytes; returns its path and job count.
fn build_log(dir: &Path, bytes: u64) -> (PathBuf, u64) {
    let blocks = fixture_blocks();
    let path = dir.join(format!("big-{}mb.log", bytes / 1_000_000));
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
    let (mut written, mut copy, mut jobs) = (0u64, 0i64, 0u64);
    let per_copy = {
        let mut ids: Vec<(String, String)> = blocks
            .iter()
            .map(|b| {
                let id = &b[b.find('(').unwrap() + 1..b.find(')').unwrap()];
                let mut parts = id.split('.');
                (parts.next().unwrap().to_string(), parts.next().unwrap().to_string())
            })
            .collect();
        ids.sort();
        ids.dedup();
        ids.len() as u64
    };
    while written < bytes {
        for block in &blocks {
            let cluster: i64 =
                block[block.find('(').unwrap() + 1..].split('.').next().unwrap().parse().unwrap();
            // Clusters 19-50 in the fixtures: 100 numbers a copy keep them apart.
            let text = shifted(block, cluster + 100 * copy, 60 * copy);
            out.write_all(text.as_bytes()).unwrap();
            written += text.len() as u64;
        }
        copy += 1;
        jobs += per_copy;
    }
    out.flush().unwrap();
    (path, jobs)
}

/// What a child process used.
struct Usage {
    wall: Duration,
    cpu: Duration,
    max_rss_kb: i64,
    status: i32,
}

#[allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time
fn measure(cmd: &mut Command) -> Usage {
    let start = Instant::now();
    let child = cmd.spawn().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in; the child is ours
    // and is reaped here (its Child is then dropped without waiting).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(got, pid, "wait4: {}", std::io::Error::last_os_error());
    let wall = start.elapsed();
    drop(child);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Usage {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        max_rss_kb: usage.ru_maxrss,
        status: if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 },
    }
}

fn cosched() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
}

fn quiet(mut cmd: Command) -> Command {
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    cmd
}

fn run_size(dir: &Path, mb: u64, reference: bool) {
    let (log, jobs) = build_log(dir, mb * 1_000_000);
    let size = std::fs::metadata(&log).unwrap().len() as f64 / 1e6;
    println!("log: {size:.0} MB, {jobs} jobs ({})", log.display());
    // Warm the page cache for everyone alike.
    let _ = measure(quiet(cosched()).arg("log").arg("stats").arg(&log));
    let out_dir = dir.join("report");
    let runs: [(&str, Command); 3] = [
        ("log stats", {
            let mut c = quiet(cosched());
            c.args(["log", "stats"]).arg(&log);
            c
        }),
        ("log dump", {
            let mut c = quiet(cosched());
            c.args(["log", "dump"]).arg(&log);
            c
        }),
        ("log report", {
            let mut c = quiet(cosched());
            c.args(["log", "report"]).arg(&log).arg("--out").arg(&out_dir);
            c
        }),
    ];
    let mut stats_times = None;
    for (name, mut cmd) in runs {
        // Best of 3 for the times; the peak RSS is the largest seen.
        let usages: Vec<Usage> = (0..3).map(|_| measure(&mut cmd)).collect();
        assert!(usages.iter().all(|u| u.status == 0), "{name} failed");
        let wall = usages.iter().map(|u| u.wall).min().unwrap();
        let cpu = usages.iter().map(|u| u.cpu).min().unwrap();
        let rss_kb = usages.iter().map(|u| u.max_rss_kb).max().unwrap();
        println!(
            "  cosched {name:<10}  peak RSS {:>7.1} MB   wall {:>6.2} s   CPU {:>6.2} s   {:>6.0} MB/s",
            rss_kb as f64 / 1024.0,
            wall.as_secs_f64(),
            cpu.as_secs_f64(),
            size / wall.as_secs_f64()
        );
        if name == "log stats" {
            stats_times = Some((wall, cpu));
        }
    }
    if !reference {
        return;
    }
    let script = shared().join("tools/ref_userlog.py");
    let mut cmd = Command::new("python3");
    cmd.arg(&script).arg("time").arg(&log).arg("1").stdout(Stdio::piped()).stderr(Stdio::piped());
    match cmd.output() {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            print!("  HTCondor's reader (same file, same run): {text}");
            // "… best of 1: 15.052 s = …": its own timing of the reading alone.
            let secs = text
                .split("best of 1: ")
                .nth(1)
                .and_then(|s| s.split_whitespace().next())
                .and_then(|s| s.parse::<f64>().ok());
            let (Some(secs), Some((wall, _))) = (secs, stats_times) else {
                println!("  could not read the reference time from: {text}");
                return;
            };
            // Its CPU time: the same reading under `time`, minus Python's start.
            let cpu = reference_cpu(&log, &script);
            println!(
                "  log stats vs HTCondor's reader: {:.1}× by wall time (target ≥ 20×, aim 40×){}",
                secs / wall.as_secs_f64(),
                match (cpu, stats_times) {
                    (Some(cpu), Some((_, ours))) =>
                        format!(", {:.1}× by CPU time", cpu.as_secs_f64() / ours.as_secs_f64()),
                    _ => String::new(),
                }
            );
        }
        Ok(out) => println!(
            "  HTCondor's reader unavailable (pip install htcondor): {}",
            String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")
        ),
        Err(e) => println!("  HTCondor's reader unavailable (python3: {e})"),
    }
}

/// CPU seconds HTCondor's reader spends reading `log`: a run that reads it,
/// minus a run that only imports the module.
fn reference_cpu(log: &Path, script: &Path) -> Option<Duration> {
    let read = measure(&mut quiet({
        let mut c = Command::new("python3");
        c.arg(script).arg("time").arg(log).arg("1");
        c
    }));
    let import = measure(&mut quiet({
        let mut c = Command::new("python3");
        c.args(["-c", "import htcondor2"]);
        c
    }));
    (read.status == 0 && import.status == 0).then(|| read.cpu.saturating_sub(import.cpu))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo test --benches` runs this without --bench: only a tiny log then.
    let full = args.iter().any(|a| a == "--bench");
    let mut sizes: Vec<u64> =
        args.windows(2).filter(|w| w[0] == "--mb").filter_map(|w| w[1].parse().ok()).collect();
    if sizes.is_empty() {
        sizes.push(if full { 200 } else { 2 });
    }
    let reference = full && !args.iter().any(|a| a == "--no-reference");
    let dir = tempfile::tempdir().unwrap();
    for mb in sizes {
        run_size(dir.path(), mb, reference);
    }
}
