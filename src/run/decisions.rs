//! The policy's decisions, kept with the run: `runs/<id>/decisions.jsonl`
//! beside the user logs, one JSON [`Decision`] a line, so that the run's
//! report can draw why each site got the jobs it got — also after
//! `--resume` (the file is appended to) and for runs the daemon drives. A
//! run whose policy explains nothing (bulk, …) leaves no file.
//!
//! The record is for people, not for resume: a line lost to a crash costs a
//! point on a chart, never a job. So lines are buffered and written after
//! each batch of inputs, without fsync, and a bad line is skipped on reading.
//!
//! Bounded: a site's first [`EXACT_FIRST`] window changes are written as
//! they come, so that a run of hours has every window that was in force
//! (the real-pool suite checks the jobs running against them). Past those,
//! window changes closer than [`WINDOW_SPACING`] run seconds to the last one
//! written are coalesced (the latest wins and is written once the spacing
//! has passed, or at the end), so a site writes at most two window points
//! per spacing; and past [`MAX_PER_SITE`] points of a kind a site writes no
//! more of that kind but its last window. In a run of several kinds of job
//! each kind's windows and verdicts at a site ([`Decision::job_kind`]) are
//! bounded so too, apart from the site's own. A week-long run of 10^6 jobs thus
//! stays within a few MB per site whatever the policy.

use crate::engine::{Ending, Observer};
use crate::policy::{Action, Decision, DecisionKind, Policy, SiteEvent, SiteId, Time};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// The file's name in the run's directory.
pub const FILE: &str = "decisions.jsonl";

/// Window points a site writes as they come, before any is coalesced.
pub const EXACT_FIRST: usize = 1_000;

/// Run seconds within which a site's window changes are coalesced, past
/// its first [`EXACT_FIRST`].
pub const WINDOW_SPACING: f64 = 60.0;

/// Window points, and verdicts, written per site at most.
pub const MAX_PER_SITE: usize = 10_000;

/// Appends a run's decisions to its [`FILE`], and passes everything on to
/// the observer it wraps.
pub struct Recording<'a> {
    inner: &'a mut dyn Observer,
    out: Sink,
    /// By site and kind of job (`None`: the site's own).
    sites: BTreeMap<(SiteId, Option<String>), SiteTally>,
    dirty: bool,
}

/// The file, opened at the first line (a run without decisions leaves none).
/// A file that cannot be written costs only the record: the run goes on and
/// says so once.
struct Sink {
    path: PathBuf,
    file: Option<std::io::BufWriter<std::fs::File>>,
    failed: bool,
}

impl Sink {
    fn write(&mut self, d: &Decision) {
        if self.failed {
            return;
        }
        if self.file.is_none() {
            let opened = std::fs::OpenOptions::new().create(true).append(true).open(&self.path);
            match opened {
                Ok(f) => self.file = Some(std::io::BufWriter::new(f)),
                Err(e) => return self.fail(e),
            }
        }
        let line = serde_json::to_string(d).unwrap_or_default();
        if let Some(Err(e)) = self.file.as_mut().map(|w| writeln!(w, "{line}")) {
            self.fail(e);
        }
    }

    fn flush(&mut self) {
        if let Some(Err(e)) = self.file.as_mut().map(Write::flush) {
            self.fail(e);
        }
    }

    fn fail(&mut self, e: std::io::Error) {
        tracing::warn!("{}: {e}; the run's report will not show its decisions", self.path.display());
        self.failed = true;
        self.file = None;
    }
}

#[derive(Default)]
struct SiteTally {
    last_window_at: Option<Time>,
    /// A window change held back by the spacing.
    pending: Option<Decision>,
    windows: usize,
    verdicts: usize,
}

impl<'a> Recording<'a> {
    /// Records into `run_dir/decisions.jsonl` (appending).
    pub fn new(run_dir: &Path, inner: &'a mut dyn Observer) -> Self {
        let out = Sink { path: run_dir.join(FILE), file: None, failed: false };
        Recording { inner, out, sites: BTreeMap::new(), dirty: false }
    }

    fn record(&mut self, decisions: &[Decision]) {
        for d in decisions {
            let tally = self.sites.entry((d.site, d.job_kind.clone())).or_default();
            match d.kind {
                DecisionKind::Window { .. } => {
                    let spaced = tally.windows < EXACT_FIRST
                        || tally.last_window_at.is_none_or(|t| d.at >= t + WINDOW_SPACING);
                    if spaced && tally.windows < MAX_PER_SITE {
                        if let Some(p) = tally.pending.take() {
                            tally.windows += 1;
                            self.out.write(&p);
                        }
                        tally.last_window_at = Some(d.at);
                        tally.windows += 1;
                        self.out.write(d);
                    } else {
                        tally.pending = Some(d.clone());
                    }
                }
                DecisionKind::Verdict { .. } => {
                    if tally.verdicts < MAX_PER_SITE {
                        tally.verdicts += 1;
                        self.out.write(d);
                    }
                }
            }
        }
        self.dirty = true;
    }

    /// Writes the windows held back and flushes.
    fn finish(&mut self) {
        let pending: Vec<Decision> = self.sites.values_mut().filter_map(|s| s.pending.take()).collect();
        for d in &pending {
            self.out.write(d);
        }
        self.out.flush();
    }

    fn flush(&mut self) {
        if std::mem::take(&mut self.dirty) {
            self.out.flush();
        }
    }
}

impl Observer for Recording<'_> {
    fn action(&mut self, now: Time, action: &Action) {
        self.inner.action(now, action);
    }
    fn event(&mut self, now: Time, site: SiteId, event: &SiteEvent) {
        self.inner.event(now, site, event);
    }
    fn decisions(&mut self, decisions: &[Decision]) {
        self.record(decisions);
        self.inner.decisions(decisions);
    }
    fn site_unreachable(&mut self, site: SiteId, down: Option<(Time, String)>) {
        self.inner.site_unreachable(site, down);
    }
    fn progress(&mut self, now: Time, policy: &dyn Policy) {
        self.flush();
        self.inner.progress(now, policy);
    }
    fn checkpoint(&mut self, now: Time, policy: &dyn Policy, cursors: &[Option<crate::engine::SiteCursor>]) {
        self.inner.checkpoint(now, policy, cursors);
    }
    fn finished(&mut self, now: Time, policy: &dyn Policy, ending: Ending) {
        self.finish();
        self.inner.finished(now, policy, ending);
    }
}

/// The decisions recorded in `run_dir`, in the order written; none when the
/// run recorded none (an older cosched, a policy without decisions). Lines
/// that do not parse (a crash mid-line) are skipped.
pub fn read(run_dir: &Path) -> Vec<Decision> {
    let Ok(file) = std::fs::File::open(run_dir.join(FILE)) else { return Vec::new() };
    std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str(&line).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::NullObserver;

    fn window(at: Time, site: u32, window: f64) -> Decision {
        Decision::of_site(at, SiteId(site), DecisionKind::Window { window, capacity: None })
    }

    #[test]
    fn a_sites_first_window_changes_are_all_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut null = NullObserver;
        let mut rec = Recording::new(dir.path(), &mut null);
        rec.record(&[window(0.0, 0, 16.0), window(1.0, 0, 32.0), window(2.0, 0, 8.0)]);
        rec.finish();
        let at: Vec<Time> = read(dir.path()).iter().map(|d| d.at).collect();
        assert_eq!(at, vec![0.0, 1.0, 2.0]);
    }

    #[test]
    fn close_window_changes_are_coalesced_to_the_latest_and_verdicts_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut null = NullObserver;
        let mut rec = Recording::new(dir.path(), &mut null);
        // Past each site's exact points, written before t = 0 here.
        for k in 0..EXACT_FIRST {
            let at = -1e6 + k as f64;
            rec.record(&[window(at, 0, 1.0), window(at, 1, 1.0)]);
        }
        let verdict = Decision::of_site(
            5.0,
            SiteId(1),
            DecisionKind::Verdict { healthy: false, level: 8.0, slowdown: Some(2.0) },
        );
        // Site 0: 0 is written, 10 and 20 fall within the spacing (20 wins),
        // 100 is past it: 20 is written before it. Site 1 is spaced alone.
        rec.record(&[window(0.0, 0, 16.0), window(0.0, 1, 16.0), verdict.clone()]);
        rec.record(&[window(10.0, 0, 32.0), window(20.0, 0, 8.0)]);
        rec.record(&[window(100.0, 0, 4.0), window(110.0, 0, 5.0)]);
        rec.finish();
        let read = read(dir.path());
        let site0: Vec<(Time, f64)> = read
            .iter()
            .filter(|d| d.site == SiteId(0) && d.at >= 0.0)
            .filter_map(|d| match d.kind {
                DecisionKind::Window { window, .. } => Some((d.at, window)),
                _ => None,
            })
            .collect();
        assert_eq!(site0, vec![(0.0, 16.0), (20.0, 8.0), (100.0, 4.0), (110.0, 5.0)]);
        assert!(read.contains(&verdict), "{read:?}");
        assert!(read.contains(&window(0.0, 1, 16.0)), "{read:?}");
    }

    /// A kind's windows are spaced apart from its site's: a close window of
    /// one kind neither replaces nor is replaced by the site's own; and the
    /// kind comes back from the file.
    #[test]
    fn each_kinds_windows_are_spaced_on_their_own_and_keep_their_kind() {
        let dir = tempfile::tempdir().unwrap();
        let mut null = NullObserver;
        let mut rec = Recording::new(dir.path(), &mut null);
        let of = |kind: &str, d: Decision| Decision { job_kind: Some(kind.into()), ..d };
        for k in 0..EXACT_FIRST {
            let at = -1e6 + k as f64;
            rec.record(&[window(at, 0, 1.0), of("io", window(at, 0, 1.0))]);
        }
        rec.record(&[window(0.0, 0, 16.0), of("io", window(0.0, 0, 6.0))]);
        // Within the spacing: each held back apart, the latest of each kept.
        rec.record(&[window(10.0, 0, 20.0), of("io", window(20.0, 0, 7.0)), of("cpu", window(30.0, 0, 9.0))]);
        rec.finish();
        let late: Vec<(Option<String>, Time, f64)> = read(dir.path())
            .into_iter()
            .filter(|d| d.at >= 0.0)
            .filter_map(|d| match d.kind {
                DecisionKind::Window { window, .. } => Some((d.job_kind, d.at, window)),
                DecisionKind::Verdict { .. } => None,
            })
            .collect();
        let io = Some("io".to_string());
        let cpu = Some("cpu".to_string());
        assert_eq!(
            late,
            vec![
                (None, 0.0, 16.0),
                (io.clone(), 0.0, 6.0),
                (cpu, 30.0, 9.0),
                (None, 10.0, 20.0),
                (io, 20.0, 7.0)
            ]
        );
    }

    #[test]
    fn a_torn_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let good = serde_json::to_string(&window(1.0, 0, 3.0)).unwrap();
        std::fs::write(dir.path().join(FILE), format!("{good}\n{{\"at\":2.0,\"si")).unwrap();
        assert_eq!(read(dir.path()), vec![window(1.0, 0, 3.0)]);
        assert!(read(&dir.path().join("nowhere")).is_empty());
    }
}
