//! User-log parser and follower benchmarks (`cargo bench --bench userlog`).
//!
//! 1. Throughput: builds a log of at least 40 MB by concatenating the shared
//!    fixtures (in a temporary directory), parses it, and times HTCondor's own
//!    reader (`../shared/tools/ref_userlog.py time`) on the same file in the
//!    same run, printing the ratio.
//! 2. Follow latency: append one event to a local file, measure until the
//!    follower delivers it; p50/p99/max with inotify and with polling only.

use cosched::userlog::{parse_bytes, read_file, Follower, Parser};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const TARGET_BYTES: usize = 40_000_000;

fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("shared")
}

fn build_log(dir: &Path) -> PathBuf {
    let fixtures = shared().join("fixtures/userlogs");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&fixtures)
        .expect("../shared/fixtures/userlogs")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    let pieces: Vec<Vec<u8>> = logs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let mut all = Vec::with_capacity(TARGET_BYTES + 1_000_000);
    while all.len() < TARGET_BYTES {
        for p in &pieces {
            all.extend_from_slice(p);
        }
    }
    let path = dir.join("big.log");
    std::fs::write(&path, &all).unwrap();
    path
}

#[allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time
fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        let r = f();
        best = best.min(t.elapsed());
        out = Some(r);
    }
    (best, out.unwrap())
}

fn throughput(dir: &Path) {
    let path = build_log(dir);
    let size = std::fs::metadata(&path).unwrap().len() as f64;
    let bytes = std::fs::read(&path).unwrap();
    let (t_mem, (events, diags)) = best_of(5, || parse_bytes(&bytes));
    assert!(diags.is_empty(), "the fixtures parse cleanly: {:?}", &diags[..diags.len().min(3)]);
    let n = events.len() as f64;
    drop(events);
    let (t_file, _) = best_of(5, || read_file(&path).unwrap());
    let (t_chunks, count) = best_of(5, || {
        let mut p = Parser::new();
        bytes.chunks(64 * 1024).map(|c| p.feed(c).len()).sum::<usize>()
    });
    assert_eq!(count as f64, n);
    println!("userlog parse: {} events, {:.1} MB ({})", n, size / 1e6, path.display());
    for (what, t) in [
        ("parse_bytes (in memory)", t_mem),
        ("read_file (file → events)", t_file),
        ("Parser::feed 64 KiB chunks", t_chunks),
    ] {
        let s = t.as_secs_f64();
        println!(
            "  {what:<28} best of 5: {s:.3} s = {:>10.0} events/s = {:>6.1} MB/s",
            n / s,
            size / 1e6 / s
        );
    }
    let ours = n / t_file.as_secs_f64();
    let script = shared().join("tools/ref_userlog.py");
    match Command::new("python3").arg(&script).arg("time").arg(&path).arg("3").output() {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            print!("  HTCondor's reader (same file, same run): {text}");
            let rate = text
                .split('=')
                .nth(1)
                .and_then(|s| s.split_whitespace().next())
                .and_then(|s| s.replace(',', "").parse::<f64>().ok());
            match rate {
                Some(r) => println!(
                    "  ratio (read_file events/s ÷ reference events/s): {:.1}×  (target ≥ 20×)",
                    ours / r
                ),
                None => println!("  could not read the reference rate from: {text}"),
            }
        }
        Ok(out) => println!(
            "  HTCondor's reader unavailable (pip install htcondor): {}",
            String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")
        ),
        Err(e) => println!("  HTCondor's reader unavailable (python3: {e})"),
    }
}

fn event_text(n: u64) -> String {
    format!(
        "005 ({n:05}.000.000) 2026-11-21 05:{:02}:{:02} Job terminated.\n\t(1) Normal termination (return value 0)\n...\n",
        n / 60 % 60,
        n % 60
    )
}

#[allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time
fn follow_latency(dir: &Path, polling_only: bool, rounds: u64) {
    use std::io::Write;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let path = dir.join(if polling_only { "poll.log" } else { "notify.log" });
    std::fs::write(&path, b"").unwrap();
    let mut follower = Follower::new(path.clone(), 0);
    if polling_only {
        follower = follower.polling_only();
    }
    // The writer is another thread, as HTCondor is another process: the
    // follower is already waiting inside next() when each event lands.
    let (tx, rx) = std::sync::mpsc::channel::<Instant>();
    let writer = std::thread::spawn(move || {
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        for i in 0..rounds {
            std::thread::sleep(Duration::from_millis(2 + (i * 7919) % 29));
            let t = Instant::now();
            file.write_all(event_text(i).as_bytes()).unwrap();
            tx.send(t).unwrap();
        }
    });
    let mut lat: Vec<f64> = Vec::new();
    rt.block_on(async {
        while (lat.len() as u64) < rounds {
            let got = tokio::time::timeout(Duration::from_secs(5), follower.next())
                .await
                .expect("delivered")
                .unwrap();
            let now = Instant::now();
            for _ in &got {
                lat.push(now.duration_since(rx.recv().unwrap()).as_secs_f64() * 1e3);
            }
        }
    });
    writer.join().unwrap();
    lat.sort_by(f64::total_cmp);
    let pct = |p: f64| lat[((p * lat.len() as f64).ceil() as usize).clamp(1, lat.len()) - 1];
    println!(
        "follow latency ({}, {} appends 2-30 ms apart): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms  (target p99 < 20 ms)",
        if polling_only { "polling only, as on NFS" } else { "inotify" },
        lat.len(),
        pct(0.5),
        pct(0.99),
        lat[lat.len() - 1]
    );
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` does not: keep that quick.
    let full = std::env::args().any(|a| a == "--bench");
    let dir = tempfile::tempdir().unwrap();
    if full {
        throughput(dir.path());
        follow_latency(dir.path(), false, 500);
        follow_latency(dir.path(), true, 200);
    } else {
        follow_latency(dir.path(), false, 20);
    }
}
