//! `sites.toml`: the sites of a run, the policy and its parameters, and the
//! settings of the HTCondor edge.
//!
//! The file is read in two steps so that every mistake is reported with
//! `file:line:column`: toml's span-keeping document tree is parsed first, the
//! `[policy]` table is taken out (its keys belong to whichever policy `name`
//! picks, so it can only be typed once the name is known), and the rest is
//! deserialized into strict (`deny_unknown_fields`) raw structs that keep spans.
//! Checks that need more than one value (duplicate names, removed grid types,
//! unsafe characters) then run on the raw structs, still with spans, and all
//! problems found are reported together, not just the first.
//!
//! The smallest valid file is one `[[site]]` with `name` (and `grid_resource`,
//! unless the site is the local pool); every other key has a default. Every key
//! is documented in `sites.example.toml`.
//!
//! Constraint: every string that ends up in a submit file (site names, grid
//! resources, extra submit commands) is checked here for control characters and
//! newlines, so a sites file cannot smuggle commands into a submit file.

use crate::policy::{self, CapacityMemory, PolicyConfig, RunSpec, SiteInfo, DEFAULT_GRID_POLL};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// A parsed and checked sites file.
#[derive(Clone, Debug, PartialEq)]
pub struct SitesFile {
    /// Where it was read from (messages name it; relative paths in it resolve
    /// against its directory).
    pub path: PathBuf,
    /// `[policy]`: the policy and its parameters (default: `adaptive`).
    pub policy: PolicyConfig,
    /// `[condor]`: where the HTCondor commands are and how patient to be.
    pub condor: CondorSettings,
    /// `[run]`: per-run limits.
    pub run: RunSettings,
    /// `[simulate]`: the job model used with `--simulate`.
    pub simulate: SimulateSettings,
    /// `[[site]]` tables, in file order (a site's index is its [`crate::policy::SiteId`]).
    pub sites: Vec<SiteConfig>,
}

/// `[condor]`: how the HTCondor commands are run.
#[derive(Clone, Debug, PartialEq)]
pub struct CondorSettings {
    /// Directory holding `condor_submit`, `condor_rm`, `condor_q`; `None`
    /// searches `PATH`. Relative paths are relative to the sites file.
    pub bin_dir: Option<PathBuf>,
    /// Seconds a single HTCondor command may take before it is killed (and, for
    /// `condor_submit`, counted as a transient failure).
    pub submit_timeout: f64,
    /// How many times a transiently failing `condor_rm` is retried at once
    /// (after that it is tried again every few seconds).
    pub retries: u32,
    /// Seconds the schedd may stay unreachable (every `condor_submit`
    /// failing transiently, retried with the same batch file) before the run
    /// stops with exit 1, resumable.
    pub unreachable_timeout: f64,
    /// Seconds between reads of a user log when no file notification arrives
    /// (NFS, where inotify is blind).
    pub poll_interval: f64,
}

impl Default for CondorSettings {
    fn default() -> Self {
        CondorSettings {
            bin_dir: None,
            submit_timeout: 120.0,
            retries: 3,
            unreachable_timeout: 1800.0,
            poll_interval: 5.0,
        }
    }
}

/// `[run]`: limits of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSettings {
    /// Attempts a job gets before it is reported as failed for good.
    pub max_attempts: u32,
    /// Real seconds between checkpoints of a run's state, from which
    /// `--resume` continues without replaying the whole run (0: none).
    pub checkpoint_every: f64,
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings { max_attempts: 3, checkpoint_every: 60.0 }
    }
}

/// `[simulate]`: the jobs of a `--simulate` run (the sites come from each
/// site's `[site.simulate]`).
#[derive(Clone, Debug, PartialEq)]
pub struct SimulateSettings {
    /// Mean work of a job, seconds at speed 1.
    pub base_runtime: f64,
    /// Job work is `base_runtime × U(1 − jitter, 1 + jitter)`.
    pub jitter: f64,
    /// Seed of the simulated grid's random draws.
    pub seed: u64,
    /// `[simulate.kinds]`: each kind of job's model, by the kind's name
    /// (none: every kind is one kind of load 1, the model without kinds).
    pub kinds: BTreeMap<String, crate::site_model::KindModel>,
}

impl Default for SimulateSettings {
    fn default() -> Self {
        SimulateSettings { base_runtime: 400.0, jitter: 0.2, seed: 1, kinds: BTreeMap::new() }
    }
}

/// One `[[site]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteConfig {
    /// Unique name; also the key of the capacity memory.
    pub name: String,
    /// Where Condor-G sends the jobs; `None` is the local pool (vanilla universe).
    pub grid_resource: Option<GridResource>,
    /// Operator cap on our jobs out at the site (idle + running).
    pub max_jobs: Option<u32>,
    /// Operator cap on our idle jobs at the site.
    pub max_idle: Option<u32>,
    /// Seconds a job may stay idle before it is removed and sent elsewhere.
    pub idle_timeout: Option<f64>,
    /// CPU slots available to us, when the site publishes it.
    pub slots: Option<u32>,
    /// Jobs the site starts with, a level its operator knows is below its
    /// knee (the adaptive policy's `initial_window` otherwise).
    pub initial_window: Option<u32>,
    /// Seconds between the gridmanager's polls of the site, as set
    /// (`poll_period`); `None`: [`SiteConfig::poll_period`] says.
    pub poll_period: Option<f64>,
    /// Extra submit commands for this site only (`[site.submit]`), in key order.
    pub submit_commands: Vec<(String, String)>,
    /// `[site.simulate]`: the site's model, used with `--simulate`.
    pub simulate: Option<crate::site_model::SiteParams>,
}

impl SiteConfig {
    /// A local-pool site with nothing but a name (tests, programmatic use).
    pub fn named(name: impl Into<String>) -> Self {
        SiteConfig {
            name: name.into(),
            grid_resource: None,
            max_jobs: None,
            max_idle: None,
            idle_timeout: None,
            slots: None,
            initial_window: None,
            poll_period: None,
            submit_commands: Vec::new(),
            simulate: None,
        }
    }

    /// How often the submit host learns of the site's starts and ends: as
    /// set; else the simulated model's; else, for a grid site, HTCondor's
    /// default probe interval (a run on a real pool asks the submit host's
    /// own, `run::drive`); else 0, a local pool's events being written as
    /// they happen.
    pub fn poll_period(&self) -> f64 {
        self.poll_period
            .or(self.simulate.as_ref().map(|m| m.poll_period))
            .unwrap_or(if self.grid_resource.is_some() { DEFAULT_GRID_POLL } else { 0.0 })
    }

    /// What a policy may know about the site.
    pub fn info(&self) -> SiteInfo {
        SiteInfo {
            name: self.name.clone(),
            slots: self.slots,
            max_jobs: self.max_jobs,
            max_idle: self.max_idle,
            idle_timeout: self.idle_timeout,
            initial_window: self.initial_window,
            poll_period: self.poll_period(),
        }
    }
}

/// A `grid_resource` value: its type (first word) and the whole string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GridResource {
    /// `condor`, `batch`, `arc`, `ec2`, `gce`, `azure`.
    pub kind: String,
    /// The value as written (whitespace-trimmed), e.g. `condor ce.example.org ce.example.org:9619`.
    pub raw: String,
}

/// Grid types HTCondor still supports.
pub const GRID_TYPES: [&str; 6] = ["condor", "batch", "arc", "ec2", "gce", "azure"];
/// Grid types HTCondor removed in 9.1 (the 2013 thesis used gt2/gt5).
pub const REMOVED_GRID_TYPES: [&str; 4] = ["gt2", "gt5", "cream", "unicore"];
/// Batch systems `grid_resource = batch …` knows.
const BATCH_SYSTEMS: [&str; 6] = ["slurm", "pbs", "lsf", "sge", "condor", "nqs"];

impl GridResource {
    /// Parses and checks a `grid_resource` value. `Err` is (message, hint).
    pub fn parse(value: &str) -> Result<GridResource, (String, Option<String>)> {
        let raw = value.trim();
        if let Some(bad) = unsafe_char(raw) {
            return Err((format!("grid_resource contains {bad}"), None));
        }
        let words: Vec<&str> = raw.split_whitespace().collect();
        let Some(kind) = words.first().map(|k| k.to_ascii_lowercase()) else {
            return Err((
                "grid_resource is empty".into(),
                Some("omit grid_resource for the local pool, or use e.g. `condor HOST HOST:9619`".into()),
            ));
        };
        let ce_hint =
            || Some("use an HTCondor-CE instead: grid_resource = \"condor HOST HOST:9619\"".to_string());
        if REMOVED_GRID_TYPES.contains(&kind.as_str()) {
            return Err((format!("grid type `{kind}` was removed from HTCondor in version 9.1"), ce_hint()));
        }
        if !GRID_TYPES.contains(&kind.as_str()) {
            return Err((
                format!("unknown grid type `{kind}`; HTCondor knows {}", GRID_TYPES.join(", ")),
                ce_hint(),
            ));
        }
        let args = &words[1..];
        match kind.as_str() {
            "condor" if args.len() != 2 => {
                return Err((
                    format!("`condor` grid resources take a schedd and a pool, got {} word(s)", args.len()),
                    Some("for an HTCondor-CE: grid_resource = \"condor HOST HOST:9619\"".into()),
                ))
            }
            "batch" => match args.first() {
                None => {
                    return Err((
                        "`batch` grid resources name a batch system".into(),
                        Some("e.g. grid_resource = \"batch slurm user@login.example.org\"".into()),
                    ))
                }
                Some(system) if !BATCH_SYSTEMS.contains(&system.to_ascii_lowercase().as_str()) => {
                    return Err((
                        format!("unknown batch system `{system}`; known: {}", BATCH_SYSTEMS.join(", ")),
                        None,
                    ))
                }
                Some(_) => {}
            },
            "arc" | "ec2" | "gce" | "azure" if args.is_empty() => {
                return Err((format!("`{kind}` grid resources need a service address"), None))
            }
            _ => {}
        }
        Ok(GridResource { kind, raw: raw.to_string() })
    }
}

impl SitesFile {
    /// The policy `name` (its parameters from this file when it is the
    /// file's own policy), or the file's where no name is given.
    pub fn policy_named(&self, name: Option<&str>) -> Result<PolicyConfig, String> {
        match name {
            None => Ok(self.policy.clone()),
            Some(n) if n == self.policy.name() => Ok(self.policy.clone()),
            Some(n) => PolicyConfig::lookup(n),
        }
    }

    /// Everything the policy is built from, for a run of `n_jobs`.
    pub fn run_spec(&self, n_jobs: u64, memory: CapacityMemory) -> RunSpec {
        RunSpec {
            n_jobs,
            types: crate::policy::JobTypes::single(n_jobs),
            sites: self.sites.iter().map(SiteConfig::info).collect(),
            // The submit descriptions' keys: `run::drive` has them.
            kind_keys: Vec::new(),
            memory,
            max_attempts: self.run.max_attempts,
        }
    }

    /// The site model for `--simulate`: each site's `[site.simulate]` (named
    /// after the site), or `None` with the names of the sites that lack one.
    pub fn simulated_sites(&self) -> Result<Vec<crate::site_model::SiteParams>, Vec<String>> {
        let missing: Vec<String> =
            self.sites.iter().filter(|s| s.simulate.is_none()).map(|s| s.name.clone()).collect();
        if !missing.is_empty() {
            return Err(missing);
        }
        Ok(self.sites.iter().filter_map(|s| s.simulate.clone()).collect())
    }
}

// ---------------------------------------------------------------------------
// Diagnostics shared by the sites file and the submit description.

/// How bad a [`Problem`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Worth knowing; the run can go ahead.
    Warning,
    /// Nothing may be submitted until it is fixed.
    Error,
}

/// One thing wrong with an input file, where it is, and what to do about it.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub file: PathBuf,
    /// 1-based line and column, when the problem has a place.
    pub location: Option<(usize, usize)>,
    pub severity: Severity,
    pub message: String,
    pub hint: Option<String>,
}

impl Problem {
    pub fn error(file: &Path, location: Option<(usize, usize)>, message: impl Into<String>) -> Self {
        Problem {
            file: file.to_path_buf(),
            location,
            severity: Severity::Error,
            message: message.into(),
            hint: None,
        }
    }
    pub fn warning(file: &Path, location: Option<(usize, usize)>, message: impl Into<String>) -> Self {
        Problem { severity: Severity::Warning, ..Problem::error(file, location, message) }
    }
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Problem {
    /// `FILE:LINE:COL: error: MESSAGE` (compiler style, so editors can jump to
    /// it), then `  hint: …` on its own line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.location {
            write!(f, ":{line}:{col}")?;
        }
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, ": {level}: {}", self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

/// Why a sites file (or a submit description) cannot be used: every problem
/// found, errors and warnings, in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError {
    pub problems: Vec<Problem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// Describes the first character that must not go into a submit file, if any:
/// control characters (newlines included) would end or split a command.
pub fn unsafe_char(value: &str) -> Option<String> {
    value.chars().find(|c| c.is_control()).map(|c| match c {
        '\n' => "a newline".to_string(),
        '\r' => "a carriage return".to_string(),
        '\t' => "a tab".to_string(),
        c => format!("the control character U+{:04X}", c as u32),
    })
}

// ---------------------------------------------------------------------------
// Reading.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    condor: Option<RawCondor>,
    #[serde(default)]
    run: Option<RawRun>,
    #[serde(default)]
    simulate: Option<RawSimulate>,
    #[serde(default)]
    site: Vec<Spanned<RawSite>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCondor {
    bin_dir: Option<Spanned<String>>,
    submit_timeout: Option<Spanned<f64>>,
    retries: Option<u32>,
    unreachable_timeout: Option<Spanned<f64>>,
    poll_interval: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRun {
    max_attempts: Option<Spanned<u32>>,
    checkpoint_every: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSimulate {
    base_runtime: Option<Spanned<f64>>,
    jitter: Option<Spanned<f64>>,
    seed: Option<u64>,
    #[serde(default)]
    kinds: BTreeMap<Spanned<String>, Spanned<crate::site_model::KindModel>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSite {
    name: Spanned<String>,
    grid_resource: Option<Spanned<String>>,
    max_jobs: Option<Spanned<u32>>,
    max_idle: Option<Spanned<u32>>,
    idle_timeout: Option<Spanned<f64>>,
    slots: Option<Spanned<u32>>,
    initial_window: Option<Spanned<u32>>,
    poll_period: Option<Spanned<f64>>,
    #[serde(default)]
    submit: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    simulate: Option<crate::site_model::SiteParams>,
}

/// Submit commands a site may not set: cosched writes them itself.
const RESERVED_SITE_COMMANDS: [&str; 6] =
    ["universe", "grid_resource", "log", "queue", "executable", "transfer_executable"];

/// Reads and checks a sites file. Warnings do not fail the load; they are
/// dropped here (use [`load_with_warnings`] to see them).
pub fn load(path: &Path) -> Result<SitesFile, ConfigError> {
    load_with_warnings(path).map(|(file, _)| file)
}

/// The warning for a `[[site]]` setting the policy will not honour.
/// The `[[site]]` settings that `policy` will not honour, where it is not
/// the sites file's own policy (whose were found as the file was read): a
/// run's `--policy` (or a daemon request's) over the file's.
pub fn ignored_settings(policy: &PolicyConfig, sites: &SitesFile) -> Vec<Problem> {
    if policy.name() == sites.policy.name() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for site in &sites.sites {
        let settings = [
            (site.max_jobs.is_some(), "max_jobs"),
            (site.max_idle.is_some(), "max_idle"),
            (site.initial_window.is_some(), "initial_window"),
        ];
        for (set, key) in settings {
            if let Some(why) = policy.ignores(key).filter(|_| set) {
                out.push(ignored_setting(&sites.path, None, &site.name, policy.name(), key, why));
            }
        }
    }
    out
}

pub fn ignored_setting(
    path: &Path,
    location: Option<(usize, usize)>,
    site: &str,
    policy: &str,
    key: &str,
    why: &str,
) -> Problem {
    let hint = if key == "initial_window" {
        "only policy `adaptive` (the default) starts a site at its own initial_window"
    } else {
        "use policy `adaptive` (the default) or `jobrouter` where the site's limits must hold"
    };
    Problem::warning(path, location, format!("site `{site}`: policy `{policy}` does not honour {key}: {why}"))
        .with_hint(hint)
}

/// Reads and checks a sites file, returning it with any warnings.
pub fn load_with_warnings(path: &Path) -> Result<(SitesFile, Vec<Problem>), ConfigError> {
    let text = match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let offset = e.utf8_error().valid_up_to();
                let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
                return Err(ConfigError {
                    problems: vec![Problem::error(path, Some(line_col(&text, offset)), "not UTF-8 text")],
                });
            }
        },
        Err(e) => {
            return Err(ConfigError {
                problems: vec![Problem::error(path, None, format!("cannot read the sites file: {e}"))],
            })
        }
    };
    parse(path, &text)
}

/// Parses sites-file text (`path` is for messages and relative paths).
/// The longest `[condor]` timeout or interval, seconds: a month is no limit
/// for one HTCondor command or an unreachable schedd, and far above it the
/// number no longer makes a `Duration` (1e300 panicked).
pub const MAX_CONDOR_SECONDS: f64 = 30.0 * 86400.0;

pub fn parse(path: &Path, text: &str) -> Result<(SitesFile, Vec<Problem>), ConfigError> {
    let at = |span: Range<usize>| Some(line_col(text, span.start));
    let toml_problem = |e: toml::de::Error| {
        let location = e.span().map(|s| line_col(text, s.start));
        Problem::error(path, location, e.message().trim().to_string())
    };
    let fail = |problems: Vec<Problem>| Err(ConfigError { problems });

    let mut root = match DeTable::parse(text) {
        Ok(root) => root,
        Err(e) => return fail(vec![toml_problem(e)]),
    };
    let policy_table = root.get_mut().remove("policy");
    // Every unknown key at once, each with its line: they are taken out so
    // that deserializing (which would stop at the first) checks the rest, and
    // the run reports them with everything else.
    let unknown: Vec<Problem> = take_unknown_keys(root.get_mut())
        .into_iter()
        .map(|(key, span, known)| {
            Problem::error(path, at(span), format!("unknown key `{key}`"))
                .with_hint(format!("expected one of: {}", known.join(", ")))
        })
        .collect();
    fill_simulate_slots(root.get_mut());
    let raw: RawFile = match RawFile::deserialize(toml::de::Deserializer::from(root)) {
        Ok(raw) => raw,
        Err(e) => {
            // Deserializing stops at its first error; the unknown keys found
            // before it are reported with it, not lost.
            let mut problems = unknown;
            problems.push(with_shape_hint(toml_problem(e), text));
            problems.sort_by_key(|p| p.location);
            return fail(problems);
        }
    };

    let mut problems = unknown;
    let policy = match policy_table {
        None => PolicyConfig::default(),
        Some(table) => match read_policy(table) {
            Ok((policy, out_of_range)) => {
                for (message, span, hint) in out_of_range {
                    let mut p = Problem::error(path, span.and_then(at), message);
                    p.hint = hint;
                    problems.push(p);
                }
                policy
            }
            Err((message, span, hint)) => {
                let mut p = Problem::error(path, span.and_then(at), message);
                p.hint = hint;
                problems.push(p);
                // A stand-in; it is never used, as the file has an error.
                PolicyConfig::default()
            }
        },
    };

    let positive = |problems: &mut Vec<Problem>, value: &Option<Spanned<f64>>, key: &str| {
        if let Some(v) = value {
            if !(v.get_ref().is_finite() && *v.get_ref() > 0.0) {
                problems.push(Problem::error(
                    path,
                    at(v.span()),
                    format!("{key} must be a positive number of seconds"),
                ));
            }
        }
    };

    let mut condor = CondorSettings::default();
    if let Some(c) = raw.condor {
        for (value, key) in [
            (&c.submit_timeout, "submit_timeout"),
            (&c.poll_interval, "poll_interval"),
            (&c.unreachable_timeout, "unreachable_timeout"),
        ] {
            positive(&mut problems, value, key);
            if let Some(v) = value.as_ref().filter(|v| *v.get_ref() > MAX_CONDOR_SECONDS) {
                problems.push(Problem::error(
                    path,
                    at(v.span()),
                    format!("{key} must be at most {MAX_CONDOR_SECONDS} s (30 days)"),
                ));
            }
        }
        if let Some(dir) = c.bin_dir {
            let dir_path = PathBuf::from(dir.get_ref());
            if dir.get_ref().trim().is_empty() {
                problems.push(
                    Problem::error(path, at(dir.span()), "bin_dir is empty")
                        .with_hint("omit it to search PATH"),
                );
            } else {
                let base = path.parent().unwrap_or(Path::new(""));
                let dir_path = if dir_path.is_absolute() { dir_path } else { base.join(dir_path) };
                // Told, not refused: the file may be checked away from the
                // submit host it is written for.
                if !dir_path.is_dir() {
                    problems.push(
                        Problem::warning(
                            path,
                            at(dir.span()),
                            format!("bin_dir {} is not a directory here", dir_path.display()),
                        )
                        .with_hint("the directory of condor_submit on the submit host (`dirname $(which condor_submit)`), or omit it to search PATH"),
                    );
                }
                condor.bin_dir = Some(dir_path);
            }
        }
        condor.submit_timeout = c.submit_timeout.map_or(condor.submit_timeout, |v| v.into_inner());
        condor.retries = c.retries.unwrap_or(condor.retries);
        condor.unreachable_timeout =
            c.unreachable_timeout.map_or(condor.unreachable_timeout, |v| v.into_inner());
        condor.poll_interval = c.poll_interval.map_or(condor.poll_interval, |v| v.into_inner());
    }

    let mut run = RunSettings::default();
    if let Some(r) = raw.run {
        if let Some(m) = r.max_attempts {
            if *m.get_ref() == 0 {
                problems.push(Problem::error(path, at(m.span()), "max_attempts must be at least 1"));
            }
            run.max_attempts = m.into_inner();
        }
        if let Some(every) = r.checkpoint_every {
            if !(every.get_ref().is_finite() && *every.get_ref() >= 0.0) {
                problems.push(Problem::error(
                    path,
                    at(every.span()),
                    "checkpoint_every must be a number of seconds, 0 or more (0: no checkpoints)",
                ));
            }
            run.checkpoint_every = every.into_inner();
        }
    }

    let mut simulate = SimulateSettings::default();
    if let Some(s) = raw.simulate {
        positive(&mut problems, &s.base_runtime, "base_runtime");
        if let Some(j) = &s.jitter {
            if !(0.0..1.0).contains(j.get_ref()) {
                problems.push(Problem::error(path, at(j.span()), "jitter must be in [0, 1)"));
            }
        }
        simulate.base_runtime = s.base_runtime.map_or(simulate.base_runtime, |v| v.into_inner());
        simulate.jitter = s.jitter.map_or(simulate.jitter, |v| v.into_inner());
        simulate.seed = s.seed.unwrap_or(simulate.seed);
        for (name, model) in s.kinds {
            let problem =
                crate::policy::jobtype::kind_name_error(name.get_ref())
                    .map(|e| (at(name.span()), e, "name it as `--jobs NAME=COUNT:FILE` does"))
                    .or_else(|| {
                        model.get_ref().check().err().map(|e| {
                            (at(model.span()), e, "for example: [simulate.kinds] io = { load = 1.0 }")
                        })
                    });
            if let Some((location, message, hint)) = problem {
                let message = format!("[simulate.kinds] kind `{}`: {message}", name.get_ref());
                problems.push(Problem::error(path, location, message).with_hint(hint));
            }
            simulate.kinds.insert(name.into_inner(), model.into_inner());
        }
    }

    if raw.site.is_empty() {
        problems.push(
            Problem::error(path, None, "no sites: the file has no [[site]] table")
                .with_hint("add one per site: [[site]] name = \"ce1\" grid_resource = \"condor ce1.example.org ce1.example.org:9619\""),
        );
    }
    let mut sites = Vec::with_capacity(raw.site.len());
    let mut first_seen: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for site in raw.site {
        let table_at = at(site.span());
        let site = site.into_inner();
        let name_at = at(site.name.span());
        let name = site.name.get_ref().clone();
        if let Some(problem) = check_site_name(path, name_at, &name) {
            problems.push(problem);
        } else if let Some((line, col)) = first_seen.get(&name) {
            problems.push(Problem::error(path, name_at, format!("duplicate site name `{name}`")).with_hint(
                format!("it is already used at line {line}, column {col}; site names must be unique"),
            ));
        } else if let Some(loc) = name_at.or(table_at) {
            first_seen.insert(name.clone(), loc);
        }

        let grid_resource =
            site.grid_resource.as_ref().and_then(|g| match GridResource::parse(g.get_ref()) {
                Ok(g) => Some(g),
                Err((message, hint)) => {
                    let mut p = Problem::error(path, at(g.span()), message);
                    p.hint = hint;
                    problems.push(p);
                    None
                }
            });
        let counts =
            [(&site.max_jobs, "max_jobs"), (&site.slots, "slots"), (&site.initial_window, "initial_window")];
        for (cap, key) in counts {
            if let Some(v) = cap {
                if *v.get_ref() == 0 {
                    problems.push(Problem::error(path, at(v.span()), format!("{key} must be at least 1")));
                }
            }
        }
        let settings = [
            (&site.max_jobs, "max_jobs"),
            (&site.max_idle, "max_idle"),
            (&site.initial_window, "initial_window"),
        ];
        for (setting, key) in settings {
            if let Some(why) = setting.as_ref().and_then(|_| policy.ignores(key)) {
                let at = setting.as_ref().and_then(|v| at(v.span()));
                problems.push(ignored_setting(path, at, site.name.get_ref(), policy.name(), key, why));
            }
        }
        positive(&mut problems, &site.idle_timeout, "idle_timeout");
        if let Some(v) = &site.poll_period {
            if !(v.get_ref().is_finite() && *v.get_ref() >= 0.0) {
                problems.push(
                    Problem::error(path, at(v.span()), "poll_period must be a number of seconds ≥ 0".to_string())
                        .with_hint("the submit host's GRIDMANAGER_JOB_PROBE_INTERVAL for a grid site (condor_config_val tells it), 0 for the local pool"),
                );
            }
        }

        let mut submit_commands = Vec::new();
        for (key, value) in &site.submit {
            let key_at = at(key.span());
            let value_at = at(value.span());
            if let Err((message, hint)) = check_submit_key(key.get_ref()) {
                let mut p = Problem::error(path, key_at, message);
                p.hint = hint;
                problems.push(p);
                continue;
            }
            let text_value = match value.get_ref() {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => if *b { "true" } else { "false" }.to_string(),
                other => {
                    problems.push(Problem::error(
                        path,
                        value_at,
                        format!(
                            "submit command `{}` must be a string or a number, not a {}",
                            key.get_ref(),
                            other.type_str()
                        ),
                    ));
                    continue;
                }
            };
            if let Some(bad) = unsafe_char(&text_value) {
                problems.push(Problem::error(
                    path,
                    value_at,
                    format!(
                        "submit command `{}` contains {bad}; it would break the submit file",
                        key.get_ref()
                    ),
                ));
                continue;
            }
            submit_commands.push((key.get_ref().clone(), text_value));
        }

        if let Some(model) = &site.simulate {
            let problem = if model.declared_slots.is_some() {
                Some((
                    "[site.simulate] declared_slots is for scenario files".to_string(),
                    "in sites.toml the site's own `slots` is what is declared; set the slots it really has in [site.simulate] `slots`",
                ))
            } else if let Some((kind, _)) =
                model.type_speed.iter().find(|(kind, _)| !simulate.kinds.contains_key(*kind))
            {
                Some((
                    format!("[site.simulate] type_speed names the kind `{kind}`, which [simulate.kinds] does not declare"),
                    "declare it with its load ([simulate.kinds] NAME = { load = … }), or remove it from type_speed",
                ))
            } else if let Some((kind, speed)) =
                model.type_speed.iter().find(|(_, speed)| !(speed.is_finite() && **speed > 0.0))
            {
                Some((
                    format!("[site.simulate] type_speed of `{kind}` is {speed}"),
                    "a kind's speed factor at the site must be a number > 0 (1: the site's own speed)",
                ))
            } else {
                model
                    .check()
                    .err()
                    .map(|e| (e, "see the [site.simulate] fields at the top of sites.example.toml"))
            };
            if let Some((message, hint)) = problem {
                problems.push(
                    Problem::error(path, table_at, format!("site `{name}`: {message}")).with_hint(hint),
                );
            }
        }
        let simulate = site.simulate.map(|mut model| {
            model.name = name.clone();
            model
        });
        sites.push(SiteConfig {
            name,
            grid_resource,
            max_jobs: site.max_jobs.map(Spanned::into_inner),
            max_idle: site.max_idle.map(Spanned::into_inner),
            idle_timeout: site.idle_timeout.map(Spanned::into_inner),
            slots: site.slots.map(Spanned::into_inner),
            initial_window: site.initial_window.map(Spanned::into_inner),
            poll_period: site.poll_period.map(Spanned::into_inner),
            submit_commands,
            simulate,
        });
    }

    if problems.iter().any(Problem::is_error) {
        return fail(problems);
    }
    Ok((SitesFile { path: path.to_path_buf(), policy, condor, run, simulate, sites }, problems))
}

/// A deserializer's error with what to write instead, where its words alone
/// would leave the user guessing.
fn with_shape_hint(problem: Problem, text: &str) -> Problem {
    let line = problem.location.and_then(|(line, _)| text.lines().nth(line.saturating_sub(1))).unwrap_or("");
    if problem.message.contains("expected a sequence") && line.trim_start().starts_with("[site") {
        problem.with_hint("each site is a `[[site]]` table, with two brackets: one such table per site")
    } else if problem.message.contains("missing field `slots`") {
        problem.with_hint(
            "a simulated site needs its slots: `slots = N` in the [[site]] table or in its [site.simulate] table",
        )
    } else {
        problem
    }
}

/// Why `name` cannot be a site name, if it cannot: it becomes part of file
/// names and ClassAd strings, so it stays plain.
pub fn site_name_error(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("site name is empty".into());
    }
    if let Some(bad) = unsafe_char(name) {
        return Some(format!("site name contains {bad}"));
    }
    if name.len() > 64 {
        return Some(format!("site name `{name}` is {} characters long, more than 64", name.len()));
    }
    let plain = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !plain || name.starts_with('.') {
        return Some(format!("site name `{name}` has characters cosched does not allow"));
    }
    None
}

fn check_site_name(path: &Path, at: Option<(usize, usize)>, name: &str) -> Option<Problem> {
    let hint = "use letters, digits, `-`, `_` and `.`, at most 64 (for example the CE's host name)";
    site_name_error(name).map(|message| Problem::error(path, at, message).with_hint(hint))
}

/// A key of `[site.submit]`: a submit command or `+Attr` / `MY.Attr`, not one
/// cosched writes itself. `Err` is (message, hint).
pub fn check_submit_key(key: &str) -> Result<(), (String, Option<String>)> {
    let bare = key
        .strip_prefix('+')
        .or_else(|| key.strip_prefix("MY."))
        .or_else(|| key.strip_prefix("my."))
        .unwrap_or(key);
    let well_formed = bare.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if !well_formed {
        return Err((
            format!("`{key}` is not a submit command name"),
            Some("use a command like `requirements` or a job attribute like `\"+ProjectName\"`".into()),
        ));
    }
    let lower = key.to_ascii_lowercase();
    if RESERVED_SITE_COMMANDS.contains(&lower.as_str()) {
        return Err((
            format!("`{key}` is written by cosched and cannot be set per site"),
            Some(
                "grid_resource goes in the [[site]] table itself; the rest comes from the submit description"
                    .into(),
            ),
        ));
    }
    if bare.to_ascii_lowercase().starts_with("cosched") {
        return Err((format!("`{key}`: attributes named Cosched… are reserved for cosched"), None));
    }
    Ok(())
}

/// `[site.simulate]` needs `slots`; a site's own `slots` fills it in, so it
/// need not be written twice.
/// The keys each table of a sites file may have (`[policy]` is checked by
/// its policy; `[site.submit]` holds submit commands, checked later).
const TOP_KEYS: [&str; 5] = ["policy", "condor", "run", "simulate", "site"];
const CONDOR_KEYS: [&str; 5] =
    ["bin_dir", "submit_timeout", "retries", "unreachable_timeout", "poll_interval"];
const RUN_KEYS: [&str; 2] = ["max_attempts", "checkpoint_every"];
const SIMULATE_KEYS: [&str; 4] = ["base_runtime", "jitter", "seed", "kinds"];
const SITE_KEYS: [&str; 10] = [
    "name",
    "grid_resource",
    "max_jobs",
    "max_idle",
    "idle_timeout",
    "slots",
    "initial_window",
    "poll_period",
    "submit",
    "simulate",
];

/// Removes the keys no table of the sites file knows; returns each as (key,
/// its span, the keys that table knows).
fn take_unknown_keys(root: &mut DeTable<'_>) -> Vec<(String, Range<usize>, &'static [&'static str])> {
    fn take(
        table: &mut DeTable<'_>,
        known: &'static [&'static str],
        out: &mut Vec<(String, Range<usize>, &'static [&'static str])>,
    ) {
        let unknown: Vec<_> =
            table.keys().filter(|k| !known.contains(&k.get_ref().as_ref())).cloned().collect();
        for key in unknown {
            out.push((key.get_ref().to_string(), key.span(), known));
            table.remove(key.get_ref().as_ref());
        }
    }
    let mut out = Vec::new();
    take(root, &TOP_KEYS, &mut out);
    for (name, known) in
        [("condor", &CONDOR_KEYS[..]), ("run", &RUN_KEYS[..]), ("simulate", &SIMULATE_KEYS[..])]
    {
        if let Some(DeValue::Table(t)) = root.get_mut(name).map(Spanned::get_mut) {
            take(t, known, &mut out);
        }
    }
    if let Some(DeValue::Array(sites)) = root.get_mut("site").map(Spanned::get_mut) {
        for site in sites.iter_mut() {
            if let DeValue::Table(t) = site.get_mut() {
                take(t, &SITE_KEYS, &mut out);
            }
        }
    }
    out.sort_by_key(|u| u.1.start);
    out
}

fn fill_simulate_slots(root: &mut DeTable<'_>) {
    let Some(sites) = root.get_mut("site") else { return };
    let DeValue::Array(sites) = sites.get_mut() else { return };
    for site in sites.iter_mut() {
        let DeValue::Table(site) = site.get_mut() else { continue };
        let Some(slots) = site.get("slots").cloned() else { continue };
        let Some(model) = site.get_mut("simulate") else { continue };
        let DeValue::Table(model) = model.get_mut() else { continue };
        if !model.contains_key("slots") {
            let key_span = slots.span();
            model.insert(Spanned::new(key_span, std::borrow::Cow::Borrowed("slots")), slots);
        }
    }
}

type PolicyError = (String, Option<Range<usize>>, Option<String>);

/// The `[policy]` table's policy, and what is wrong with its values (each
/// error located at its key); `Err` where the table cannot be read at all.
fn read_policy(table: Spanned<DeValue<'_>>) -> Result<(PolicyConfig, Vec<PolicyError>), PolicyError> {
    let span = table.span();
    let DeValue::Table(mut table) = table.into_inner() else {
        return Err(("`policy` must be a table: [policy]".into(), Some(span), None));
    };
    let (name, name_span) = match table.remove("name") {
        None => (policy::DEFAULT_POLICY.to_string(), span.clone()),
        Some(name) => match name.get_ref().as_str() {
            Some(s) => (s.to_string(), name.span()),
            None => return Err(("policy name must be a string".into(), Some(name.span()), None)),
        },
    };
    let key_spans: BTreeMap<String, Range<usize>> =
        table.iter().map(|(k, v)| (k.get_ref().to_string(), k.span().start..v.span().end)).collect();
    let rest = Spanned::new(span.clone(), DeValue::Table(table));
    let policy = match PolicyConfig::read(&name, toml::de::ValueDeserializer::from(rest)) {
        Ok(Some(policy)) => policy,
        Ok(None) => {
            return Err((
                format!("unknown policy `{name}`"),
                Some(name_span),
                Some(format!("choose one of {}", policy::names())),
            ))
        }
        Err(e) => return Err((format!("[policy]: {}", e.message().trim()), e.span(), None)),
    };
    let mut out_of_range: Vec<PolicyError> = policy
        .out_of_range()
        .into_iter()
        .map(|(key, range)| {
            // A default is always in range: the key is in the table.
            let at = key_spans.get(key).cloned().or(Some(span.clone()));
            (format!("[policy] {key} is out of range"), at, Some(format!("{key} is {range}")))
        })
        .collect();
    out_of_range.sort_by_key(|(_, at, _)| at.as_ref().map(|r| r.start));
    Ok((policy, out_of_range))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sites_file_reader_does_not_depend_on_the_simulator() {
        // sites.toml is read for real HTCondor runs; the site model's
        // parameters it shares with scenario files live in `site_model`.
        let simulator = ["crate", "::", "sim"].concat();
        let uses: Vec<&str> = include_str!("config.rs")
            .lines()
            .map(|line| line.split("//").next().unwrap_or(""))
            .filter(|code| code.contains(&simulator))
            .collect();
        assert!(uses.is_empty(), "config.rs imports the simulator: {uses:?}");
    }

    fn parse_str(text: &str) -> Result<(SitesFile, Vec<Problem>), ConfigError> {
        parse(Path::new("sites.toml"), text)
    }

    fn errors(text: &str) -> Vec<Problem> {
        match parse_str(text) {
            Ok(_) => panic!("expected errors for:\n{text}"),
            Err(e) => e.problems.into_iter().filter(Problem::is_error).collect(),
        }
    }

    #[test]
    fn smallest_file_gets_defaults() {
        let (file, warnings) = parse_str(
            "[[site]]\nname = \"ce1\"\ngrid_resource = \"condor ce1.example.org ce1.example.org:9619\"\n",
        )
        .unwrap();
        assert!(warnings.is_empty());
        assert_eq!(file.policy.name(), "adaptive");
        assert_eq!(file.condor, CondorSettings::default());
        assert_eq!(file.run.max_attempts, 3);
        assert_eq!(file.simulate, SimulateSettings::default());
        assert_eq!(file.sites.len(), 1);
        let site = &file.sites[0];
        assert_eq!(site.name, "ce1");
        let grid = site.grid_resource.as_ref().unwrap();
        assert_eq!(
            (grid.kind.as_str(), grid.raw.as_str()),
            ("condor", "condor ce1.example.org ce1.example.org:9619")
        );
        assert_eq!((site.max_jobs, site.max_idle, site.slots, site.idle_timeout), (None, None, None, None));
        let spec = file.run_spec(10, CapacityMemory::new());
        assert_eq!((spec.n_jobs, spec.sites.len(), spec.max_attempts), (10, 1, 3));
    }

    #[test]
    fn local_pool_site_needs_no_grid_resource() {
        let (file, _) = parse_str("[[site]]\nname = \"local\"\n").unwrap();
        assert_eq!(file.sites[0].grid_resource, None);
    }

    #[test]
    fn example_file_parses_with_three_simulated_sites() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("sites.example.toml");
        let (file, warnings) = load_with_warnings(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(file.sites.len(), 3);
        let models = file.simulated_sites().expect("every example site has a model");
        for (site, model) in file.sites.iter().zip(&models) {
            assert_eq!(model.name, site.name);
            assert_eq!(Some(model.slots), site.slots, "[site.simulate] slots default to the site's");
        }
        let flaky = file.sites.iter().find(|s| s.grid_resource.as_ref().is_some_and(|g| g.kind == "batch"));
        assert!(flaky.is_some());
        let tusker = &file.sites[0];
        assert!(tusker.submit_commands.iter().any(|(k, v)| k == "+ProjectName" && v == "\"cosched-demo\""));
    }

    #[test]
    fn settings_are_read() {
        let text = "[policy]\nname = \"thesis\"\n[condor]\nbin_dir = \"bin\"\nsubmit_timeout = 30\nretries = 5\npoll_interval = 2.5\n[run]\nmax_attempts = 7\n[simulate]\nbase_runtime = 100\njitter = 0\nseed = 9\n[[site]]\nname = \"a\"\nmax_jobs = 10\nmax_idle = 4\nslots = 20\nidle_timeout = 600\ninitial_window = 12\n[site.submit]\nrequirements = \"Memory > 1024\"\nrequest_cpus = 2\n";
        let (file, _) = parse(Path::new("/etc/cosched/sites.toml"), text).unwrap();
        assert_eq!(file.policy.name(), "thesis");
        assert_eq!(file.condor.bin_dir.as_deref(), Some(Path::new("/etc/cosched/bin")));
        assert_eq!(
            (file.condor.submit_timeout, file.condor.retries, file.condor.poll_interval),
            (30.0, 5, 2.5)
        );
        assert_eq!(file.run.max_attempts, 7);
        assert_eq!(
            file.simulate,
            SimulateSettings { base_runtime: 100.0, jitter: 0.0, seed: 9, kinds: BTreeMap::new() }
        );
        let s = &file.sites[0];
        assert_eq!(
            (s.max_jobs, s.max_idle, s.slots, s.idle_timeout),
            (Some(10), Some(4), Some(20), Some(600.0))
        );
        assert_eq!(s.info().initial_window, Some(12), "the policy is told the site's first window");
        assert_eq!(
            s.submit_commands,
            vec![
                ("request_cpus".to_string(), "2".to_string()),
                ("requirements".to_string(), "Memory > 1024".to_string())
            ]
        );
    }

    #[test]
    fn syntax_error_has_line_and_column() {
        let e = errors("[[site]]\nname = \"a\"\ngrid_resource = condor x\n");
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].location.map(|l| l.0), Some(3), "{}", e[0]);
    }

    #[test]
    fn unknown_key_is_located() {
        let e = errors("[[site]]\nname = \"a\"\nmax_job = 3\n");
        assert_eq!(e[0].location, Some((3, 1)), "{}", e[0]);
        assert!(e[0].message.contains("max_job"), "{}", e[0]);
        let e = errors("[condor]\nretry = 3\n[[site]]\nname = \"a\"\n");
        assert_eq!(e[0].location.map(|l| l.0), Some(2), "{}", e[0]);
    }

    #[test]
    fn all_site_problems_are_reported_together() {
        let text = "[[site]]\nname = \"a\"\ngrid_resource = \"gt2 gatekeeper.example.edu/jobmanager-pbs\"\n\
                    [[site]]\nname = \"a\"\ngrid_resource = \"condor onlyone\"\n\
                    [[site]]\nname = \"b\"\n[site.submit]\nrequirements = \"x\\ny\"\nuniverse = \"vanilla\"\n";
        let e = errors(text);
        let find = |needle: &str| {
            e.iter().find(|p| p.message.contains(needle)).unwrap_or_else(|| panic!("no `{needle}` in {e:#?}"))
        };
        let gt2 = find("removed");
        assert_eq!(gt2.location.map(|l| l.0), Some(3));
        assert!(gt2.hint.as_deref().unwrap().contains("9619"));
        let dup = find("duplicate");
        assert_eq!(dup.location.map(|l| l.0), Some(5));
        assert!(dup.hint.as_deref().unwrap().contains("line 2"));
        assert_eq!(find("schedd and a pool").location.map(|l| l.0), Some(6));
        assert_eq!(find("newline").location.map(|l| l.0), Some(10));
        assert_eq!(find("written by cosched").location.map(|l| l.0), Some(11));
    }

    #[test]
    fn a_value_of_the_wrong_type_is_reported_with_the_unknown_keys_found_before_it() {
        let e = errors("[[site]]\nname = \"a\"\nslotz = 10\nmax_jobs = \"ten\"\n");
        let lines: Vec<_> = e.iter().map(|p| (p.location.map(|l| l.0), p.message.clone())).collect();
        assert_eq!(e.len(), 2, "{lines:?}");
        assert!(
            e[0].message.contains("unknown key `slotz`") && e[0].location.map(|l| l.0) == Some(3),
            "{lines:?}"
        );
        assert!(e[1].message.contains("invalid type") && e[1].location.map(|l| l.0) == Some(4), "{lines:?}");
    }

    #[test]
    fn a_single_bracket_site_table_and_a_simulated_site_without_slots_are_told_what_to_write() {
        let e = errors("[site]\nname = \"a\"\n");
        assert!(e[0].hint.as_deref().unwrap_or("").contains("`[[site]]`"), "{e:?}");
        let e = errors("[[site]]\nname = \"a\"\n[site.simulate]\n");
        assert!(e[0].hint.as_deref().unwrap_or("").contains("slots = N"), "{e:?}");
        let long = "a".repeat(65);
        let e = errors(&format!("[[site]]\nname = \"{long}\"\n"));
        assert!(e[0].message.contains("65 characters long"), "{e:?}");
    }

    #[test]
    fn a_condor_timeout_past_a_month_is_refused_at_its_line() {
        let e = errors("[condor]\nsubmit_timeout = 1e300\npoll_interval = 2\n[[site]]\nname = \"a\"\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].location.map(|l| l.0), Some(2));
        assert!(e[0].message.contains("at most 2592000 s"), "{}", e[0]);
    }

    #[test]
    fn a_sites_poll_is_as_set_else_the_models_else_a_grid_sites_default() {
        let text = "[[site]]\nname = \"local\"\n\
                    [[site]]\nname = \"ce\"\ngrid_resource = \"condor ce.example.org ce.example.org:9619\"\n\
                    [[site]]\nname = \"set\"\ngrid_resource = \"condor b.example.org b.example.org:9619\"\npoll_period = 5\n\
                    [[site]]\nname = \"sim\"\ngrid_resource = \"condor c.example.org c.example.org:9619\"\n\
                    [site.simulate]\nslots = 8\npoll_period = 15\n";
        let (file, _) = parse(Path::new("sites.toml"), text).expect("valid");
        let polls: Vec<f64> = file.sites.iter().map(|s| s.info().poll_period).collect();
        assert_eq!(polls, vec![0.0, DEFAULT_GRID_POLL, 5.0, 15.0]);
        let e = errors("[[site]]\nname = \"a\"\npoll_period = -5\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].message.contains("poll_period"), "{}", e[0]);
        assert_eq!(e[0].location.map(|l| l.0), Some(3), "{}", e[0]);
    }

    #[test]
    fn bad_site_names_and_values_are_refused() {
        for name in ["", "a b", "x\\u0007", "../up", "a\\nb"] {
            let e = errors(&format!("[[site]]\nname = \"{name}\"\n"));
            assert_eq!(e[0].location.map(|l| l.0), Some(2), "{name}: {}", e[0]);
        }
        let e = errors("[[site]]\nname = \"a\"\ngrid_resource = \"condor a\\rb c\"\n");
        assert!(e[0].message.contains("carriage return"), "{}", e[0]);
        let e = errors("[[site]]\nname = \"a\"\nmax_jobs = 0\nidle_timeout = -1\ninitial_window = 0\n");
        assert_eq!(e.len(), 3, "{e:?}");
        let first_window =
            e.iter().find(|p| p.message.contains("initial_window")).expect("initial_window = 0");
        assert_eq!(first_window.location.map(|l| l.0), Some(5), "{first_window}");
        let e = errors("# nothing\n[run]\nmax_attempts = 2\n");
        assert!(e[0].message.contains("no sites"));
    }

    #[test]
    fn checkpoints_are_every_minute_unless_set_and_a_negative_interval_is_refused() {
        let (file, _) = parse_str("[[site]]\nname = \"a\"\n").unwrap();
        assert_eq!(file.run.checkpoint_every, 60.0);
        let (file, _) = parse_str("[run]\ncheckpoint_every = 0\n[[site]]\nname = \"a\"\n").unwrap();
        assert_eq!(file.run.checkpoint_every, 0.0, "0 turns them off");
        let e = errors("[run]\ncheckpoint_every = -5\n[[site]]\nname = \"a\"\n");
        assert_eq!(e[0].location.map(|l| l.0), Some(2), "{}", e[0]);
        assert!(e[0].message.contains("checkpoint_every"), "{}", e[0]);
    }

    #[test]
    fn grid_resource_types() {
        for ok in [
            "condor ce.example.org ce.example.org:9619",
            "batch slurm",
            "batch pbs user@host",
            "arc https://arc.example.org/arex",
            "ec2 https://ec2.amazonaws.com/",
        ] {
            assert!(GridResource::parse(ok).is_ok(), "{ok}");
        }
        for (bad, needle) in [
            ("gt5 host/jobmanager", "removed"),
            ("cream https://x", "removed"),
            ("unicore x", "removed"),
            ("globus x", "unknown grid type"),
            ("batch moab", "unknown batch system"),
            ("arc", "service address"),
            ("  ", "empty"),
        ] {
            let (message, _) = GridResource::parse(bad).unwrap_err();
            assert!(message.contains(needle), "{bad}: {message}");
        }
    }

    #[test]
    fn simulated_kinds_are_declared_once_with_their_load_and_named_by_type_speed() {
        let site = "[[site]]\nname = \"a\"\nslots = 4\n[site.simulate]\n";
        let kinds = "[simulate.kinds]\nio = { load = 1.0 }\ncpu = { load = 0.05 }\n";
        let (file, _) = parse_str(&format!("{kinds}{site}type_speed = {{ cpu = 2.0 }}\n")).unwrap();
        let loads: Vec<(&str, f64)> = file.simulate.kinds.iter().map(|(n, k)| (n.as_str(), k.load)).collect();
        assert_eq!(loads, [("cpu", 0.05), ("io", 1.0)]);
        assert_eq!(file.sites[0].simulate.as_ref().unwrap().type_speed, [("cpu".to_string(), 2.0)].into());
        for (bad, line, needles) in [
            ("[simulate.kinds]\nio = { load = 1.5 }\n", 2, &["kind `io`", "[0, 1]"][..]),
            ("[simulate.kinds]\nio = { lod = 1 }\n", 2, &["lod"][..]),
            ("[simulate.kinds]\n\"9io\" = { load = 1 }\n", 2, &["`9io`", "kind of job"][..]),
        ] {
            let e = errors(&format!("{bad}{site}"));
            assert!(needles.iter().all(|n| e[0].message.contains(n)), "{bad}: {}", e[0]);
            assert_eq!(e[0].location.map(|l| l.0), Some(line), "{bad}: {}", e[0]);
        }
        let e = errors(&format!("{site}type_speed = {{ cpu = 2.0 }}\n"));
        assert!(e[0].message.contains("`cpu`") && e[0].message.contains("[simulate.kinds]"), "{}", e[0]);
        assert!(e[0].hint.as_deref().is_some_and(|h| h.contains("load")), "{}", e[0]);
        let e = errors(&format!("{kinds}{site}type_speed = {{ cpu = 0 }}\n"));
        assert!(e[0].message.contains("type_speed of `cpu`"), "{}", e[0]);
    }

    #[test]
    fn policy_table() {
        let e = errors("[policy]\nname = \"fastest\"\n[[site]]\nname = \"a\"\n");
        assert_eq!(e[0].location, Some((2, 8)), "{}", e[0]);
        let hint = e[0].hint.as_deref().unwrap();
        for registered in policy::POLICIES {
            assert!(hint.contains(registered.name), "the hint does not offer {}: {hint}", registered.name);
        }
        let e = errors("[policy]\nname = \"bulk\"\nno_such_parameter = 1\n[[site]]\nname = \"a\"\n");
        assert!(e[0].message.contains("no_such_parameter"), "{}", e[0]);
        assert_eq!(e[0].location.map(|l| l.0), Some(3), "{}", e[0]);
        let (file, _) = parse_str("[policy]\nname = \"jobrouter\"\n[[site]]\nname = \"a\"\n").unwrap();
        assert_eq!(file.policy.name(), "jobrouter");
        let (file, _) = parse_str("[policy]\nname = \"thesis\"\nc2 = 1.5\n[[site]]\nname = \"a\"\n").unwrap();
        let params = file.policy.params::<policy::thesis::Params>().expect("thesis reads thesis parameters");
        assert_eq!((params.c2, params.c1), (1.5, 2.0), "c2 as written, c1 by default");
    }

    #[test]
    fn policy_parameters_out_of_their_range_are_each_refused_at_their_line() {
        let text = "[policy]\ninitial_window = 0\nfalse_alarm = 1.5\nmissed_alarm = nan\n\
                    degradation_factor = 0.5\nprobe_gain = -1\nidle_timeout = 0\nprecision = inf\n[[site]]\nname = \"a\"\n";
        let e = errors(text);
        let lines: Vec<_> = e.iter().map(|p| p.location.map(|l| l.0)).collect();
        assert_eq!(lines, (2..=8).map(Some).collect::<Vec<_>>(), "{e:?}");
        assert!(e[1].message.contains("false_alarm is out of range"), "{}", e[1]);
        assert!(e[1].hint.as_deref().unwrap_or("").contains("a probability"), "{:?}", e[1].hint);
        // Each policy's own: a router that may route nothing would wait for ever.
        let e = errors("[policy]\nname = \"jobrouter\"\nmax_jobs = 0\n[[site]]\nname = \"a\"\n");
        assert_eq!((e.len(), e[0].location.map(|l| l.0)), (1, Some(3)), "{e:?}");
        let e = errors("[policy]\nname = \"thesis\"\nc1 = 1\ninitial_k = 0\n[[site]]\nname = \"a\"\n");
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(parse_str("[policy]\nprobe_gain = 1.5\nfalse_alarm = 0.01\n[[site]]\nname = \"a\"\n").is_ok());
    }

    #[test]
    fn simulate_model_is_strict_and_named_after_the_site() {
        let (file, _) =
            parse_str("[[site]]\nname = \"a\"\n[site.simulate]\nslots = 5\ncapacity = \"inf\"\n").unwrap();
        let model = file.sites[0].simulate.as_ref().unwrap();
        assert_eq!((model.name.as_str(), model.slots), ("a", 5));
        let e = errors("[[site]]\nname = \"a\"\nslots = 3\n[site.simulate]\ncapcity = 4\n");
        assert_eq!(e[0].location.map(|l| l.0), Some(5), "{}", e[0]);
        assert!(file.simulated_sites().is_ok());
        let (file, _) = parse_str("[[site]]\nname = \"a\"\n").unwrap();
        assert_eq!(file.simulated_sites(), Err(vec!["a".to_string()]));
    }

    #[test]
    fn line_col_counts_characters() {
        let text = "ab\nçd=x\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 3), (2, 1));
        assert_eq!(line_col(text, 6), (2, 3), "ç is one column");
        assert_eq!(line_col(text, 999), (3, 1));
    }

    #[test]
    fn problem_display_is_compiler_style() {
        let p = Problem::error(Path::new("s.toml"), Some((3, 7)), "bad").with_hint("fix it");
        assert_eq!(p.to_string(), "s.toml:3:7: error: bad\n  hint: fix it");
    }
}
