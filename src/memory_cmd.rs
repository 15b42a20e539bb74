//! `cosched memory`: what runs remembered per site and kind of job
//! ([`crate::state::memory`]), shown (`cosched memory [--json]`) and
//! forgotten (`cosched memory forget SITE [--kind KIND]`, `--all`), in the
//! memory database `cosched submit` would use ([`memory_file`]).
//!
//! Forgetting is how to make a site's next run start cold on purpose (the
//! site was upgraded, its knee is stale) and how to clear a memory that
//! cannot be read. Nothing is created here: a file that does not exist is
//! said to hold nothing.

use crate::state::memory::{forget_command, memory_file, shown_kind, MemoryDb, Remembered};
use crate::state::StateError;
use crate::{CmdResult, Exit, Failure};
use clap::{Args, Subcommand};
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct MemoryArgs {
    #[command(subcommand)]
    pub action: Option<MemoryAction>,
    /// The memory database (default, as for `cosched submit`:
    /// $COSCHED_MEMORY, else $XDG_STATE_HOME/cosched/memory.db, else
    /// ~/.local/state/cosched/memory.db).
    #[arg(long, value_name = "PATH", global = true, conflicts_with = "state_dir")]
    pub memory: Option<PathBuf>,
    /// The memory kept in a state directory: the daemon's working there, or
    /// that of `cosched submit --simulate --state-dir DIR` runs.
    #[arg(long, value_name = "DIR", global = true)]
    pub state_dir: Option<PathBuf>,
    /// Print what is remembered as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum MemoryAction {
    /// Forget what runs learned at a site (of one kind with --kind), or
    /// everything (--all): the next run there starts cold.
    #[command(after_help = "Examples:\n  cosched memory forget ce1\n  \
                            cosched memory forget ce1 --kind name:my-analysis\n  \
                            cosched memory forget --all --memory shared/memory.db")]
    Forget(ForgetArgs),
}

#[derive(Args, Debug)]
pub struct ForgetArgs {
    /// The site, by its name in sites.toml.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub site: Option<String>,
    /// Only this kind of job: its key as `cosched memory` shows it (`fp2:…`,
    /// `name:…`), or the name a description gives its kind (`+CoschedKind`).
    #[arg(long, value_name = "KIND", conflicts_with = "all")]
    pub kind: Option<String>,
    /// Forget everything remembered, at every site.
    #[arg(long)]
    pub all: bool,
}

/// `cosched memory …`.
pub fn command(args: MemoryArgs) -> CmdResult {
    let path = memory_file(args.memory.as_deref(), args.state_dir.as_deref()).map_err(Failure::usage)?;
    match args.action {
        None => show(&path, args.json),
        Some(MemoryAction::Forget(forget)) => forget_in(&path, &forget),
    }
}

/// A memory database that cannot be used, as the command's failure: one of
/// another program or of a newer cosched, or damaged, is the user's to fix.
fn unusable(e: StateError) -> Failure {
    match e {
        StateError::Corrupt { .. } => Failure::usage(e.to_string()),
        other => Failure::failed(other.to_string()),
    }
}

/// One row of `cosched memory --json`.
#[derive(Serialize)]
struct Row<'a> {
    site: &'a str,
    kind: &'a str,
    updated: &'a str,
    run: Option<&'a str>,
    /// What was learned; absent where it cannot be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<&'a crate::policy::SiteMemory>,
    /// Why it cannot be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    unreadable: Option<&'a str>,
}

fn show(path: &Path, json: bool) -> CmdResult {
    let entries = match MemoryDb::open_existing(path).map_err(unusable)? {
        Some(db) => db.entries().map_err(unusable)?,
        None => Vec::new(),
    };
    if json {
        let rows: Vec<Row> = entries
            .iter()
            .map(|e| Row {
                site: &e.site,
                kind: &e.kind,
                updated: &e.updated,
                run: e.run.as_deref(),
                memory: e.memory.as_ref().ok(),
                unreadable: e.memory.as_ref().err().map(String::as_str),
            })
            .collect();
        let out = serde_json::json!({ "path": path, "entries": rows });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        print!("{}", render(path, &entries));
    }
    Ok(Exit::Ok)
}

/// What `cosched memory` prints: a line for the file, then one per site
/// and kind.
fn render(path: &Path, entries: &[Remembered]) -> String {
    let mut out = String::new();
    if entries.is_empty() {
        let _ = writeln!(
            out,
            "memory {}: nothing remembered{}",
            path.display(),
            if path.exists() { "" } else { " (no such file yet: a run creates it)" }
        );
        return out;
    }
    let sites: BTreeSet<&str> = entries.iter().map(|e| e.site.as_str()).collect();
    let kinds: BTreeSet<&str> = entries.iter().map(|e| e.kind.as_str()).collect();
    let _ =
        writeln!(out, "memory {}: {} site(s), {} kind(s) of job", path.display(), sites.len(), kinds.len());
    let site_w = entries.iter().map(|e| e.site.len()).max().unwrap_or(0).max(4);
    let kind_w = entries.iter().map(|e| shown_kind(&e.kind).len()).max().unwrap_or(0).max(4);
    let _ = writeln!(
        out,
        "  {:<site_w$}  {:<kind_w$}  {:>8}  {:>7}  {:>13}  updated",
        "site", "kind", "capacity", "ceiling", "mean run time"
    );
    let number = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    for e in entries {
        let kind = shown_kind(&e.kind);
        let when = match &e.run {
            Some(run) => format!("{} (run {run})", e.updated),
            None => e.updated.clone(),
        };
        match &e.memory {
            Ok(m) => {
                let run_time = m.baseline_runtime.map_or("-".to_string(), |t| format!("{t:.0} s"));
                let ceiling = number(m.ceiling) + if m.ceiling_assumed { "?" } else { "" };
                let _ = writeln!(
                    out,
                    "  {:<site_w$}  {kind:<kind_w$}  {:>8}  {ceiling:>7}  {run_time:>13}  {when}{}",
                    e.site,
                    number(m.capacity),
                    if m.unresponsive { "  (started nothing)" } else { "" }
                );
            }
            Err(why) => {
                let _ = writeln!(
                    out,
                    "  {:<site_w$}  {kind:<kind_w$}  unreadable ({why}); runs ignore it: `{}` removes it",
                    e.site,
                    forget_command(path, &e.site, Some(&e.kind))
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "  (capacity: jobs at once last seen healthy, where a run starts; ceiling: fewest seen \
         degraded, `?` if assumed; kind: its description's fingerprint, or name:NAME)"
    );
    out
}

fn forget_in(path: &Path, args: &ForgetArgs) -> CmdResult {
    let Some(mut db) = MemoryDb::open_existing(path).map_err(unusable)? else {
        return Err(Failure::usage(format!(
            "{}: no such file, so nothing to forget (name the memory with --memory PATH, or \
             --state-dir DIR for a daemon's or --simulate runs')",
            path.display()
        )));
    };
    let entries = db.entries().map_err(unusable)?;
    let Some(site) = &args.site else {
        let gone = db.forget(None, None).map_err(unusable)?;
        println!(
            "forgot everything in {} ({gone} kind(s) of job at site(s)); the next runs start cold",
            path.display()
        );
        return Ok(Exit::Ok);
    };
    let kind = match &args.kind {
        Some(kind) => Some(kind_at(path, &entries, site, kind)?),
        None => {
            known_site(path, &entries, site)?;
            None
        }
    };
    let gone = db.forget(Some(site), kind.as_deref()).map_err(unusable)?;
    let what = kind.map_or(format!("{gone} kind(s) of job"), |k| format!("kind {}", shown_kind(&k)));
    println!(
        "forgot what runs learned of {what} at {site} in {}; the next run there starts cold",
        path.display()
    );
    Ok(Exit::Ok)
}

/// `site` if `entries` hold it, else an error listing the sites they hold.
fn known_site(path: &Path, entries: &[Remembered], site: &str) -> Result<(), Failure> {
    if entries.iter().any(|e| e.site == site) {
        return Ok(());
    }
    let sites: BTreeSet<&str> = entries.iter().map(|e| e.site.as_str()).collect();
    let held = if sites.is_empty() {
        "it holds none".to_string()
    } else {
        format!("sites remembered: {}", sites.into_iter().collect::<Vec<_>>().join(", "))
    };
    Err(Failure::usage(format!("{}: nothing remembered of site `{site}`; {held}", path.display())))
}

/// The key of `kind` at `site`: the key itself, or `name:KIND` for a
/// kind's name; else an error listing the kinds remembered there.
fn kind_at(path: &Path, entries: &[Remembered], site: &str, kind: &str) -> Result<String, Failure> {
    known_site(path, entries, site)?;
    let here: Vec<&str> = entries.iter().filter(|e| e.site == site).map(|e| e.kind.as_str()).collect();
    let named = format!("name:{kind}");
    let wanted = if kind == "''" { "" } else { kind };
    match here.iter().find(|k| **k == wanted || **k == named) {
        Some(k) => Ok(k.to_string()),
        None => Err(Failure::usage(format!(
            "{}: nothing remembered of kind `{kind}` at {site}; kinds remembered there: {}",
            path.display(),
            here.iter().map(|k| shown_kind(k)).collect::<Vec<_>>().join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{CapacityMemory, SiteMemory};

    fn remembered(path: &Path) {
        let mut db = MemoryDb::open(path).unwrap();
        let mut m = CapacityMemory::new();
        let learned = SiteMemory {
            capacity: Some(6.0),
            ceiling: Some(8.0),
            baseline_runtime: Some(412.0),
            ..Default::default()
        };
        m.insert("alpha", "fp2:aa", learned.clone());
        m.insert("alpha", "name:io", learned.clone());
        m.insert("beta", "name:io", SiteMemory { unresponsive: true, ..Default::default() });
        db.save("r1", &m).unwrap();
    }

    #[test]
    fn show_lists_each_site_and_kind_with_what_was_learned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.db");
        remembered(&path);
        let db = MemoryDb::open(&path).unwrap();
        let text = render(&path, &db.entries().unwrap());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("2 site(s), 2 kind(s)"), "{text}");
        assert!(
            lines[2].contains("alpha") && lines[2].contains("fp2:aa") && lines[2].contains("6.0"),
            "{text}"
        );
        assert!(
            lines[2].contains("8.0") && lines[2].contains("412 s") && lines[2].contains("run r1"),
            "{text}"
        );
        assert!(lines[4].contains("beta") && lines[4].contains("started nothing"), "{text}");
        let none = render(&dir.path().join("absent.db"), &[]);
        assert!(none.contains("nothing remembered") && none.contains("no such file yet"), "{none}");
    }

    #[test]
    fn forget_takes_a_site_a_kind_by_key_or_name_and_names_what_is_known_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.db");
        remembered(&path);
        let forget = |site: Option<&str>, kind: Option<&str>, all: bool| {
            let args = ForgetArgs { site: site.map(str::to_string), kind: kind.map(str::to_string), all };
            forget_in(&path, &args)
        };
        let err = forget(Some("gamma"), None, false).unwrap_err();
        assert_eq!(err.exit, Exit::Usage);
        assert!(err.message.contains("`gamma`") && err.message.contains("alpha, beta"), "{err}");
        let err = forget(Some("alpha"), Some("cpu"), false).unwrap_err();
        assert!(err.message.contains("`cpu`") && err.message.contains("fp2:aa, name:io"), "{err}");

        let left = || {
            let db = MemoryDb::open(&path).unwrap();
            db.entries().unwrap().into_iter().map(|e| (e.site, e.kind)).collect::<Vec<_>>()
        };
        forget(Some("alpha"), Some("io"), false).unwrap();
        assert_eq!(left(), [("alpha".into(), "fp2:aa".into()), ("beta".into(), "name:io".into())]);
        forget(Some("beta"), None, false).unwrap();
        assert_eq!(left(), [("alpha".into(), "fp2:aa".into())]);
        forget(None, None, true).unwrap();
        assert!(left().is_empty());
        let err = forget_in(&dir.path().join("absent.db"), &ForgetArgs { site: None, kind: None, all: true })
            .unwrap_err();
        assert!(err.message.contains("no such file") && err.message.contains("--memory"), "{err}");
        assert!(!dir.path().join("absent.db").exists(), "nothing is created");
    }
}
