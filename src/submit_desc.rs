//! The user's submit description (`job.sub`), its validation, and the
//! per-batch submit files cosched writes from it.
//!
//! A submit description is written as for `condor_submit`: comments, `\` line
//! continuations, `key = value` commands, `+Attr` / `MY.Attr` job attributes,
//! macros such as `$(Process)`, `@=TAG … @TAG` multi-line values, and one
//! `queue` statement. cosched keeps the user's commands in order and writes, for
//! each batch it sends to a site, a submit file of its own:
//!
//! - the user's commands, minus `universe`, `grid_resource`, `log` and `queue`
//!   (cosched owns those); a relative `executable` is made absolute and, unless
//!   the user set one, `initialdir` is the submit description's directory, so
//!   relative paths mean what they meant next to `job.sub`;
//! - `universe = grid` and the site's `grid_resource` (or the user's universe,
//!   default `vanilla`, for a local-pool site), then the site's `[site.submit]`
//!   commands;
//! - cosched's own `log` (one per site) and the attributes `+CoschedRun`,
//!   `+CoschedBatch`, `+CoschedJob`, by which a job in the queue can be found
//!   again after a crash, and `+CoschedType`, the job's kind;
//! - `queue CoschedJob from ( … )` listing the batch's job indexes.
//!
//! **`$(CoschedJob)` is the job's stable global index, 0..N-1**: use it to name
//! inputs and outputs (`output = out.$(CoschedJob)`). A job that is resubmitted
//! (after a failure, or moved off a slow site) keeps its index. `$(Process)` is
//! only the position within one batch and repeats across batches and sites; do
//! not use it to name files. The user's own `queue` statement is replaced (a
//! warning says so when it would have queued more than one job).
//!
//! A run may hold several kinds of job ([`JobKinds`]: `cosched submit SITES
//! --jobs io=400:io.sub --jobs cpu=1000:cpu.sub`), each its own description
//! and count. The indexes stay global over the run, the kinds spread evenly
//! over them ([`crate::policy::jobtype::interleave`]), and each job also gets
//! its kind's name as `$(CoschedType)` and `CoschedType` (`job` in a run of
//! one description). A batch file holds jobs of one kind: a site's batch of
//! several kinds is one `condor_submit` per kind ([`crate::condor`]).
//!
//! What runs learn is remembered per kind of job: a description's kind is
//! its fingerprint, or the name `+CoschedKind = "name"` gives it (`kind`).
//!
//! Constraints: parsing never panics; every problem is reported with
//! `file:line:column`, all of them rather than just the first. Every value
//! that goes into a submit file is checked for control characters, and
//! every macro it uses for a definition (`macros`: condor_submit expands an
//! undefined one to nothing, so a misspelt `$(CoschedJob)` would have every
//! job write one file).

mod files;
mod kind;
mod macros;

pub use kind::{blind_kind_key, kind_key};

use crate::config::{line_col, unsafe_char, Problem, SiteConfig, SitesFile};
use crate::policy::jobtype::{kind_name_error, SINGLE_TYPE};
use crate::policy::{JobId, JobTypeId, JobTypes};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Why a submit description cannot be used (same shape as a sites-file error).
pub type SubmitDescError = crate::config::ConfigError;

/// One `key = value` command of the user's description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// As written: `request_memory`, `+ProjectName`, `MY.Foo`.
    pub key: String,
    /// Trimmed; continuation lines joined; a heredoc's lines joined with `\n`.
    pub value: String,
    /// The value came as `key @=TAG … @TAG`; this is the tag.
    pub heredoc: Option<String>,
    /// 1-based line and column of the key.
    pub line: usize,
    pub column: usize,
}

impl Command {
    /// The key as HTCondor compares it: lower case, `+X` as `my.x`.
    pub fn normalized_key(&self) -> String {
        normalize_key(&self.key)
    }
}

fn normalize_key(key: &str) -> String {
    let lower = key.to_ascii_lowercase();
    match lower.strip_prefix('+') {
        Some(attr) => format!("my.{attr}"),
        None => lower,
    }
}

/// The user's `queue` statement (cosched replaces it; kept to warn about it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueStatement {
    /// What followed `queue`, continuation lines and item lists joined.
    pub args: String,
    /// How many jobs it would queue, when that can be told from the text.
    pub count: Option<u64>,
    pub line: usize,
}

/// A parsed submit description: the user's commands in order.
#[derive(Clone, Debug, PartialEq)]
pub struct SubmitDescription {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its directory (absolute when it could be made so): relative paths in it
    /// are relative to this.
    pub dir: PathBuf,
    /// Commands before the (first) `queue` statement, in order.
    pub commands: Vec<Command>,
    /// The first `queue` statement, if any.
    pub queue: Option<QueueStatement>,
    /// What the parser noticed but did not refuse (extra `queue` statements,
    /// commands after `queue`, cosched-owned commands that will be replaced).
    pub warnings: Vec<Problem>,
}

/// Reads and parses a submit description.
pub fn load(path: &Path) -> Result<SubmitDescription, SubmitDescError> {
    let bytes = std::fs::read(path).map_err(|e| SubmitDescError {
        problems: vec![Problem::error(path, None, format!("cannot read the submit description: {e}"))],
    })?;
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let offset = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            return Err(SubmitDescError {
                problems: vec![Problem::error(path, Some(line_col(&text, offset)), "not UTF-8 text")],
            });
        }
    };
    parse(path, &text)
}

/// Parses submit-description text (`path` names it in messages and anchors
/// relative paths).
pub fn parse(path: &Path, text: &str) -> Result<SubmitDescription, SubmitDescError> {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let mut commands = Vec::new();
    let mut queue: Option<QueueStatement> = None;
    let lines: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let mut i = 0;
    while i < lines.len() {
        let first_line = i + 1;
        // Join `\` continuations into one logical line.
        let mut logical = String::new();
        loop {
            let raw = if logical.is_empty() { lines[i] } else { lines[i].trim_start() };
            i += 1;
            let trimmed_end = raw.trim_end();
            match trimmed_end.strip_suffix('\\') {
                Some(head) if i < lines.len() => {
                    // The next line's indentation is layout, not content.
                    logical.push_str(head);
                    if !head.ends_with(char::is_whitespace) {
                        logical.push(' ');
                    }
                    let next = lines[i].trim_start();
                    if next.starts_with('#') {
                        i += 1; // a comment inside a continuation is skipped
                    }
                }
                Some(head) => {
                    logical.push_str(head);
                    break;
                }
                None => {
                    logical.push_str(raw);
                    break;
                }
            }
        }
        let indent = logical.len() - logical.trim_start().len();
        let column = logical[..indent].chars().count() + 1;
        let stmt = logical.trim();
        if stmt.is_empty() || stmt.starts_with('#') {
            continue;
        }
        let first_word = stmt.split(|c: char| c.is_whitespace() || c == '=').next().unwrap_or("");
        let word = first_word.to_ascii_lowercase();

        if word == "queue" && !stmt[first_word.len()..].trim_start().starts_with('=') {
            let mut args = stmt[first_word.len()..].trim().to_string();
            // `queue v from (` continues until the line holding `)`.
            let mut items = None;
            if args.contains('(') && !args.contains(')') {
                let mut list = Vec::new();
                let mut closed = false;
                while i < lines.len() {
                    let item = lines[i].trim();
                    i += 1;
                    if let Some(last) = item.strip_suffix(')') {
                        if !last.trim().is_empty() {
                            list.push(last.trim().to_string());
                        }
                        closed = true;
                        break;
                    }
                    if !item.is_empty() && !item.starts_with('#') {
                        list.push(item.to_string());
                    }
                }
                if !closed {
                    problems.push(
                        Problem::error(path, Some((first_line, column)), "the queue item list is not closed")
                            .with_hint("end the list with a line holding `)`"),
                    );
                }
                items = Some(list.len());
                args.push_str(&list.join(" "));
                args.push(')');
            }
            let statement = QueueStatement { count: queue_count(&args, items), args, line: first_line };
            if queue.is_none() {
                queue = Some(statement);
            } else {
                warnings.push(
                    Problem::warning(path, Some((first_line, column)), "a second queue statement is ignored")
                        .with_hint("cosched queues each job itself; one queue statement is enough"),
                );
            }
            continue;
        }
        if matches!(word.as_str(), "if" | "elif" | "else" | "endif" | "include" | "error" | "warning")
            && !stmt[first_word.len()..].trim_start().starts_with('=')
        {
            problems.push(
                Problem::error(
                    path,
                    Some((first_line, column)),
                    format!("`{word}` statements are not supported by cosched"),
                )
                .with_hint("write the resulting commands out plainly (cosched rewrites the file per batch)"),
            );
            continue;
        }

        let Some(eq) = stmt.find('=') else {
            problems.push(
                Problem::error(
                    path,
                    Some((first_line, column)),
                    format!("expected `key = value`, found `{}`", shorten(stmt)),
                )
                .with_hint("each command is `name = value`; a job attribute is `+Name = value`"),
            );
            continue;
        };
        let mut key = stmt[..eq].trim();
        let mut value = stmt[eq + 1..].trim().to_string();
        let mut heredoc = None;
        if let Some(bare) = key.strip_suffix('@') {
            // `key @=TAG`: the value is every following line up to `@TAG`.
            key = bare.trim_end();
            let tag = std::mem::take(&mut value);
            if tag.is_empty() || tag.contains(char::is_whitespace) {
                problems.push(Problem::error(
                    path,
                    Some((first_line, column)),
                    "a multi-line value needs a tag: `key @=end`",
                ));
                continue;
            }
            let mut body = Vec::new();
            let mut closed = false;
            while i < lines.len() {
                let l = lines[i];
                i += 1;
                if l.trim() == format!("@{tag}") {
                    closed = true;
                    break;
                }
                body.push(l);
            }
            if !closed {
                problems.push(Problem::error(
                    path,
                    Some((first_line, column)),
                    format!("multi-line value not closed by `@{tag}`"),
                ));
                continue;
            }
            value = body.join("\n");
            heredoc = Some(tag);
        }
        let key_ok = {
            let bare = key.strip_prefix('+').unwrap_or(key);
            bare.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && bare.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
        };
        if !key_ok {
            problems.push(
                Problem::error(
                    path,
                    Some((first_line, column)),
                    format!("`{}` is not a submit command name", shorten(key)),
                )
                .with_hint("names are letters, digits, `_` and `.`; job attributes start with `+`"),
            );
            continue;
        }
        let bad = if heredoc.is_some() {
            value
                .chars()
                .find(|c| c.is_control() && !matches!(c, '\n' | '\t'))
                .and_then(|c| unsafe_char(&c.to_string()))
        } else {
            value.chars().find(|c| c.is_control() && *c != '\t').and_then(|c| unsafe_char(&c.to_string()))
        };
        if let Some(bad) = bad {
            problems.push(Problem::error(
                path,
                Some((first_line, column)),
                format!("the value of `{key}` contains {bad}"),
            ));
            continue;
        }
        if queue.is_some() {
            warnings.push(
                Problem::warning(
                    path,
                    Some((first_line, column)),
                    format!("`{key}` comes after the queue statement and is ignored"),
                )
                .with_hint("move it above the queue statement"),
            );
            continue;
        }
        commands.push(Command { key: key.to_string(), value, heredoc, line: first_line, column });
    }

    if problems.is_empty() {
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        Ok(SubmitDescription { path: path.to_path_buf(), dir, commands, queue, warnings })
    } else {
        problems.extend(warnings);
        problems.sort_by_key(|p| p.location.unwrap_or((0, 0)));
        Err(SubmitDescError { problems })
    }
}

/// How many jobs a queue statement's arguments queue, when evident:
/// `` → 1, `5` → 5, `3 x in (a b)` → 6, `x from (` + 2 item lines → 2;
/// `from FILE` and `matching` are unknown. `list_items` counts the lines of
/// a multi-line item list.
fn queue_count(args: &str, list_items: Option<usize>) -> Option<u64> {
    let args = args.trim();
    if args.is_empty() {
        return Some(1);
    }
    let (count, rest) = match args.split_once(char::is_whitespace) {
        Some((first, rest)) => match first.parse::<u64>() {
            Ok(n) => (n, rest.trim()),
            Err(_) => (1, args),
        },
        None => return args.parse::<u64>().ok(),
    };
    let items = match list_items {
        Some(k) => k,
        None => {
            let open = rest.find('(')?;
            let close = rest.rfind(')').filter(|c| *c > open)?;
            rest[open + 1..close].split([',', ' ', '\t']).filter(|s| !s.trim().is_empty()).count()
        }
    };
    Some(count.saturating_mul(items as u64))
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s.to_string()
    }
}

impl SubmitDescription {
    /// The last `key` command's value (keys compare case-insensitively).
    pub fn get(&self, key: &str) -> Option<&str> {
        let key = normalize_key(key);
        self.commands.iter().rev().find(|c| c.normalized_key() == key).map(|c| c.value.as_str())
    }

    fn get_command(&self, key: &str) -> Option<&Command> {
        let key = normalize_key(key);
        self.commands.iter().rev().find(|c| c.normalized_key() == key)
    }

    pub fn executable(&self) -> Option<&str> {
        self.get("executable")
    }

    /// `transfer_executable` (default true).
    pub fn transfers_executable(&self) -> bool {
        self.get("transfer_executable").is_none_or(|v| !is_false(v))
    }

    /// The executable on the submit host, resolved against [`Self::dir`];
    /// `None` when there is none, it is not transferred, or it holds a macro.
    pub fn local_executable(&self) -> Option<PathBuf> {
        let exe = self.executable()?;
        if !self.transfers_executable() || exe.contains("$(") {
            return None;
        }
        Some(self.dir.join(exe))
    }

    /// The submit file for one batch of `jobs` of kind `kind` at `site` (see
    /// the module docs for its layout). `run`, `batch` and `kind` are
    /// identifiers cosched made or checked ([`kind_name_error`]); any
    /// character outside `[A-Za-z0-9._-]` is replaced by `_`.
    pub fn render_batch(
        &self,
        site: &SiteConfig,
        run: &str,
        batch: &str,
        kind: &str,
        jobs: &[JobId],
        log: &Path,
    ) -> String {
        let run = plain_id(run);
        let batch = plain_id(batch);
        let kind = plain_id(kind);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# Written by cosched for run {run}, batch {batch} at site {}: {} job(s) of kind {kind}.",
            plain_id(&site.name),
            jobs.len()
        );
        let _ = writeln!(
            out,
            "# From {}. $(CoschedJob) is the global job index, $(CoschedType) its kind.",
            one_line(&self.path.display().to_string())
        );
        // First, so that the user's commands may use it.
        let _ = writeln!(out, "CoschedType = {kind}");
        let mut user_universe = None;
        let mut has_initialdir = false;
        let transfers_exe = self.transfers_executable();
        for c in &self.commands {
            let key = c.normalized_key();
            match key.as_str() {
                "universe" => {
                    user_universe = Some(c.value.to_ascii_lowercase());
                    continue;
                }
                "grid_resource" | "log" => continue,
                _ => {}
            }
            let mut value = c.value.clone();
            if key == "executable" && transfers_exe && !value.contains("$(") {
                value = absolute_in(&self.dir, &value);
            }
            if key == "initialdir" {
                has_initialdir = true;
                if !value.contains("$(") {
                    value = absolute_in(&self.dir, &value);
                }
            }
            match &c.heredoc {
                Some(tag) => {
                    let _ = writeln!(out, "{} @={tag}\n{value}\n@{tag}", c.key);
                }
                None => {
                    let _ = writeln!(out, "{} = {value}", c.key);
                }
            }
        }
        if !has_initialdir {
            let _ = writeln!(out, "initialdir = {}", one_line(&self.dir.display().to_string()));
        }
        match &site.grid_resource {
            Some(grid) => {
                let _ = writeln!(out, "universe = grid\ngrid_resource = {}", one_line(&grid.raw));
            }
            None => {
                let universe = match user_universe.as_deref() {
                    Some(u) if u != "grid" => u.to_string(),
                    _ => "vanilla".to_string(),
                };
                let _ = writeln!(out, "universe = {universe}");
            }
        }
        for (key, value) in &site.submit_commands {
            let _ = writeln!(out, "{} = {}", one_line(key), one_line(value));
        }
        let _ = writeln!(out, "log = {}", one_line(&log.display().to_string()));
        let _ = writeln!(out, "+CoschedRun = \"{run}\"");
        let _ = writeln!(out, "+CoschedBatch = \"{batch}\"");
        let _ = writeln!(out, "+CoschedJob = $(CoschedJob)");
        let _ = writeln!(out, "+CoschedType = \"{kind}\"");
        let _ = writeln!(out, "queue CoschedJob from (");
        for job in jobs {
            let _ = writeln!(out, "{}", job.0);
        }
        let _ = writeln!(out, ")");
        out
    }
}

/// The kinds of job of a run, each with its submit description, and each
/// job's kind (the run's [`JobTypes`], which its policy is told).
#[derive(Clone, Debug)]
pub struct JobKinds {
    /// By kind, in the run's kind order (a kind's index is its [`JobTypeId`]).
    descs: Vec<SubmitDescription>,
    types: JobTypes,
}

impl JobKinds {
    /// `n_jobs` jobs of the one description `desc` (`cosched submit N SITES
    /// JOB`): one kind, named [`SINGLE_TYPE`].
    pub fn single(desc: SubmitDescription, n_jobs: u64) -> Self {
        JobKinds { descs: vec![desc], types: JobTypes::single(n_jobs) }
    }

    /// Kinds of (name, count, description), their jobs interleaved over the
    /// run's indexes ([`JobTypes::interleaved`]). Names must be unique and
    /// pass [`kind_name_error`].
    pub fn new(kinds: Vec<(String, u64, SubmitDescription)>) -> Result<Self, String> {
        let mut names = Vec::new();
        let mut counts = Vec::new();
        let mut descs = Vec::new();
        for (name, count, desc) in kinds {
            if let Some(why) = kind_name_error(&name) {
                return Err(why);
            }
            if names.contains(&name) {
                return Err(format!("two kinds of job are named `{name}`"));
            }
            names.push(name);
            counts.push(count);
            descs.push(desc);
        }
        let types = JobTypes::interleaved(names, &counts)?;
        Ok(JobKinds { descs, types })
    }

    /// Each job's kind, as the policy is told.
    pub fn types(&self) -> &JobTypes {
        &self.types
    }

    /// The description of kind `t` (the first for a kind beyond the list,
    /// which a run does not have).
    pub fn desc(&self, t: JobTypeId) -> &SubmitDescription {
        self.descs.get(t.index()).unwrap_or(&self.descs[0])
    }

    /// Jobs of the run, all kinds.
    pub fn n_jobs(&self) -> u64 {
        self.types.total()
    }
}

/// One kind of job as the command line gives it: `--jobs [NAME=]COUNT:FILE`,
/// or the `N JOB` of `cosched submit N SITES JOB` (named [`SINGLE_TYPE`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindSpec {
    pub name: String,
    /// How many jobs; `None` for `cosched check SITES JOB` without `--n-jobs`.
    pub count: Option<i64>,
    /// Its submit description.
    pub path: PathBuf,
}

/// The form of a `--jobs` value, for messages.
pub const JOBS_FORM: &str = "[NAME=]COUNT:FILE";

impl KindSpec {
    /// The one kind of `cosched submit N SITES JOB`.
    pub fn single(count: Option<i64>, path: &Path) -> Self {
        KindSpec { name: SINGLE_TYPE.into(), count, path: path.to_path_buf() }
    }

    /// Parses a `--jobs` value, `[NAME=]COUNT:FILE`: the name defaults to
    /// the file's stem (`io` for `io.sub`), the count is at least 1.
    pub fn parse(value: &str) -> Result<KindSpec, String> {
        let example = "e.g. --jobs io=400:io.sub, or --jobs 400:io.sub to name the kind `io` after its file";
        let Some((head, file)) = value.split_once(':') else {
            return Err(format!("expected {JOBS_FORM} ({example})"));
        };
        let (name, count) = match head.split_once('=') {
            Some((name, count)) => (Some(name.trim()), count.trim()),
            None => (None, head.trim()),
        };
        let count: i64 = match count.parse::<i64>() {
            Ok(count) => count,
            Err(e) if matches!(e.kind(), std::num::IntErrorKind::PosOverflow) => {
                return Err(crate::policy::more_jobs_than_a_run_holds(count))
            }
            Err(_) => {
                return Err(format!(
                    "the count `{count}` is not a whole number; expected {JOBS_FORM} ({example})"
                ))
            }
        };
        if count < 1 {
            return Err(format!("the count must be at least 1, got {count}"));
        }
        if let Some(why) = crate::policy::too_many_jobs(count as u64) {
            return Err(why);
        }
        if file.is_empty() {
            return Err(format!("no submit description after `:`; expected {JOBS_FORM} ({example})"));
        }
        let path = PathBuf::from(file);
        let name = match name {
            Some(name) => {
                if let Some(why) = kind_name_error(name) {
                    return Err(why);
                }
                name.to_string()
            }
            None => {
                let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                if let Some(why) = kind_name_error(&stem) {
                    return Err(format!(
                        "{why} (the name comes from the file's name when none is given: \
                         name the kind with --jobs NAME={count}:{file})"
                    ));
                }
                stem
            }
        };
        Ok(KindSpec { name, count: Some(count), path })
    }

    /// How the command line gave it: `NAME=COUNT:FILE`.
    pub fn display(&self) -> String {
        let count = self.count.map_or("?".to_string(), |c| c.to_string());
        format!("{}={count}:{}", self.name, self.path.display())
    }
}

/// The first name given to two kinds, as an error saying what to do.
pub fn duplicate_kind(kinds: &[KindSpec]) -> Option<String> {
    for (i, k) in kinds.iter().enumerate() {
        if let Some(first) = kinds[..i].iter().find(|o| o.name == k.name) {
            return Some(format!(
                "--jobs {} and --jobs {} both name their kind `{}`; give each kind its own name: \
                 --jobs NAME={}:{}",
                first.display(),
                k.display(),
                k.name,
                k.count.unwrap_or(1),
                k.path.display()
            ));
        }
    }
    None
}

fn is_false(v: &str) -> bool {
    matches!(v.trim().to_ascii_lowercase().as_str(), "false" | "no" | "0" | "f" | "n")
}

fn absolute_in(dir: &Path, value: &str) -> String {
    let p = Path::new(value);
    if p.is_absolute() {
        value.to_string()
    } else {
        one_line(&dir.join(p).display().to_string())
    }
}

/// cosched-made identifiers go into ClassAd strings unquoted-safe.
pub fn plain_id(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect()
}

/// Last line of defence for values already validated: never let a control
/// character through into a submit file.
fn one_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() && c != '\t' { ' ' } else { c }).collect()
}

/// Expands `$(NAME)` and `$(NAME:default)` macros with `lookup` (names compare
/// case-insensitively, as HTCondor's do); unknown macros without a default are
/// left as written. Used by tests and by the fake HTCondor to see what a job
/// would get; HTCondor does the real expansion.
pub fn expand_macros(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("$(") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find(')') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(':') {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match lookup(&name.to_ascii_lowercase()).or_else(|| default.map(str::to_string)) {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Checks a sites file and a submit description together (and N, when
/// given) before anything is submitted. Returns every problem found, errors
/// and warnings; the inputs are usable when none is an error.
pub fn validate(sites: &SitesFile, desc: &SubmitDescription, n_jobs: Option<i64>) -> Vec<Problem> {
    let mut problems: Vec<Problem> = count_problem(n_jobs).into_iter().collect();

    problems.extend(description_problems(desc));

    // Sites files built in code skip `config::load`'s checks: repeat the ones
    // that protect submit files.
    let mut names = std::collections::BTreeSet::new();
    for site in &sites.sites {
        if let Some(message) = crate::config::site_name_error(&site.name) {
            problems.push(Problem::error(&sites.path, None, message.escape_debug().to_string()));
        }
        if !names.insert(site.name.as_str()) {
            problems.push(Problem::error(&sites.path, None, format!("duplicate site name `{}`", site.name)));
        }
        if let Some(grid) = &site.grid_resource {
            if let Err((message, hint)) = crate::config::GridResource::parse(&grid.raw) {
                let mut p = Problem::error(&sites.path, None, format!("site `{}`: {message}", site.name));
                p.hint = hint;
                problems.push(p);
            }
        }
        for (key, value) in &site.submit_commands {
            if let Err((message, _)) = crate::config::check_submit_key(key) {
                problems.push(Problem::error(&sites.path, None, format!("site `{}`: {message}", site.name)));
            }
            if let Some(bad) = unsafe_char(value) {
                problems.push(Problem::error(
                    &sites.path,
                    None,
                    format!("site `{}`: `{key}` contains {bad}", site.name),
                ));
            }
        }
    }
    if sites.sites.is_empty() {
        problems.push(Problem::error(&sites.path, None, "no sites"));
    }

    // The universe.
    let at = |c: &Command| Some((c.line, c.column));
    if let Some(c) = desc.get_command("universe") {
        let u = c.value.to_ascii_lowercase();
        let has_grid = sites.sites.iter().any(|s| s.grid_resource.is_some());
        let has_local = sites.sites.iter().any(|s| s.grid_resource.is_none());
        if has_grid && !matches!(u.as_str(), "vanilla" | "grid") {
            problems.push(Problem::warning(
                &desc.path,
                at(c),
                format!("`universe = {}` is replaced by `universe = grid` at grid sites", c.value),
            ));
        }
        if has_local && u == "grid" {
            problems.push(Problem::warning(
                &desc.path,
                at(c),
                "`universe = grid` becomes `vanilla` at local-pool sites",
            ));
        }
    }
    problems
}

/// Problems of the description alone (no sites file needed): the parser's
/// warnings, names cosched owns or reserves, its macros, and the files it
/// names on the submit host.
pub fn description_problems(desc: &SubmitDescription) -> Vec<Problem> {
    let mut problems = desc.warnings.clone();
    problems.extend(semantic_problems(desc));
    problems.extend(kind::kind_problems(desc));
    problems.extend(macros::macro_problems(desc));
    problems.extend(files::file_problems(desc));
    problems
}

/// Commands whose values name files, where per-batch macros collide.
const FILE_NAME_KEYS: [&str; 5] =
    ["output", "error", "transfer_output_files", "transfer_output_remaps", "initialdir"];

/// The macros that number jobs within one cluster (`macros`: `$(ItemIndex)`
/// and `$(Row)` number a batch's jobs too), then those of the cluster.
const PROC_MACROS: [&str; 6] =
    ["$(process)", "$(procid)", "$(itemindex)", "$(row)", "$(cluster)", "$(clusterid)"];
const CLUSTER_MACROS: [&str; 2] = ["$(cluster)", "$(clusterid)"];

/// What a file named by per-batch macros does across cosched's batches.
fn by_batch_numbering(value: &str) -> Option<String> {
    let lower = value.to_ascii_lowercase();
    let first = |set: &[&str]| {
        let at = set.iter().filter_map(|m| lower.find(m).map(|i| (i, m.len()))).min()?;
        value.get(at.0..at.0 + at.1).map(str::to_string)
    };
    let in_batch = first(&PROC_MACROS[..4]);
    let batch = first(&CLUSTER_MACROS);
    match (in_batch, batch) {
        (Some(job), Some(cluster)) => Some(format!(
            "names files by {cluster} and {job}, which name an attempt, not a job: a job sent again (after a \
             failure, or moved to another site) writes under another name, and which file is job k's is \
             found only in the logs"
        )),
        (Some(job), None) => Some(format!(
            "names files by {job}, which repeats across cosched's batches and sites: jobs would overwrite \
             each other's files"
        )),
        (None, Some(cluster)) => Some(format!(
            "names files by {cluster}, which every job of a batch shares: they would overwrite each other's \
             files"
        )),
        (None, None) => None,
    }
}

/// `out.$(Cluster).$(Process)` → `out.$(CoschedJob)`.
fn replace_proc_macros(value: &str) -> String {
    let mut out = value.to_string();
    for m in PROC_MACROS {
        while let Some(i) = out.to_ascii_lowercase().find(m) {
            out.replace_range(i..i + m.len(), "$(CoschedJob)");
        }
    }
    for joined in
        [".$(CoschedJob).$(CoschedJob)", "_$(CoschedJob)_$(CoschedJob)", "-$(CoschedJob)-$(CoschedJob)"]
    {
        let single = &joined[..joined.len() / 2];
        out = out.replace(joined, single);
    }
    out
}

/// What a description says that cosched will not do as written: commands it
/// owns, names it reserves, a queue statement it replaces.
fn semantic_problems(desc: &SubmitDescription) -> Vec<Problem> {
    let path = desc.path.as_path();
    let mut problems = Vec::new();
    for c in &desc.commands {
        let at = Some((c.line, c.column));
        let key = &c.key;
        let normalized = c.normalized_key();
        // `+CoschedKind` is the user's: it names the job's kind (`kind`).
        if normalized.trim_start_matches("my.").starts_with("cosched") && normalized != kind::KIND_ATTR {
            problems.push(Problem::error(path, at, format!("`{key}` is reserved for cosched")).with_hint(
                "cosched defines $(CoschedJob) and the Cosched… job attributes itself \
                         (but `+CoschedKind = \"name\"`, which names the job's kind)",
            ));
        } else if normalized == "log" {
            problems.push(Problem::warning(
                path,
                at,
                format!("`{key}` is replaced by cosched (it writes one user log per site)"),
            ));
        } else if let Some(what) =
            by_batch_numbering(&c.value).filter(|_| FILE_NAME_KEYS.contains(&normalized.as_str()))
        {
            let fixed = replace_proc_macros(&c.value);
            problems.push(
                Problem::warning(path, at, format!("`{key} = {}` {what}", c.value))
                    .with_hint(format!("use the job's stable index: `{key} = {fixed}`")),
            );
        } else if normalized == "grid_resource" {
            problems.push(Problem::warning(
                path,
                at,
                format!(
                    "`{key}` is replaced by cosched (each site's grid_resource comes from the sites file)"
                ),
            ));
        }
    }
    let queue = &desc.queue;
    if let Some(q) = &queue {
        if q.count != Some(1) && q.count != Some(0) {
            let what = match q.count {
                Some(n) => format!("{n} jobs"),
                None => "several jobs".to_string(),
            };
            problems.push(
                Problem::warning(path, Some((q.line, 1)), format!("`queue {}` would queue {what}; cosched replaces it", shorten(&q.args)))
                    .with_hint("cosched queues N jobs itself (`cosched submit N …`); use $(CoschedJob), 0..N-1, to tell them apart"),
            );
        }
    } else {
        problems.push(Problem::warning(path, None, "no queue statement (cosched queues the jobs itself)"));
    }

    problems
}

/// `cosched check SITES JOB [--n-jobs N]`, or `cosched check SITES --jobs
/// …`: loads and validates the sites file and every description and, where
/// that finds no error, runs `also` (HTCondor's own check, which lives at
/// the HTCondor edge), prints every problem to stderr (by file, then line),
/// and exits 2 if any is an error.
pub fn check(
    sites_path: &Path,
    kinds: &[KindSpec],
    also: impl FnOnce() -> (Vec<Problem>, String),
) -> crate::CmdResult {
    let (mut problems, mut summary) = check_problems(sites_path, kinds);
    if !problems.iter().any(Problem::is_error) {
        let (more, said) = also();
        problems.extend(more);
        summary.push_str(&said);
    }
    // File order reads best: per file, by line (problems without one last).
    problems.sort_by(|a, b| {
        (&a.file, a.location.is_none(), a.location).cmp(&(&b.file, b.location.is_none(), b.location))
    });
    for p in &problems {
        eprintln!("{p}");
    }
    let errors = problems.iter().filter(|p| p.is_error()).count();
    if errors > 0 {
        return Err(crate::Failure::usage(format!(
            "{errors} error(s) in the inputs; nothing was submitted (fix them and run `cosched check` again)"
        )));
    }
    println!("{summary}");
    Ok(crate::Exit::Ok)
}

/// The error of a number of jobs below 1 (`N`, `--n-jobs`, a `--jobs` count).
fn count_problem(n_jobs: Option<i64>) -> Option<Problem> {
    let n = n_jobs?;
    if let Some(why) = u64::try_from(n).ok().and_then(crate::policy::too_many_jobs) {
        return Some(Problem::error(Path::new("command line"), None, why));
    }
    (n <= 0).then_some(())?;
    Some(
        Problem::error(
            Path::new("command line"),
            None,
            format!("the number of jobs (N; `--n-jobs` of `cosched check`) must be at least 1, got {n}"),
        )
        .with_hint("cosched submit N sites.toml job.sub, with N ≥ 1"),
    )
}

/// `problems` without repeats, in their order: the sites file's problems
/// come once per description checked against it.
pub fn without_repeats(problems: Vec<Problem>) -> Vec<Problem> {
    let mut out: Vec<Problem> = Vec::with_capacity(problems.len());
    for p in problems {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// Every problem of the sites file and of each kind's description and
/// count, and, when there are no errors, a summary of what would run: a
/// line, then each kind's memory key.
pub fn check_problems(sites_path: &Path, kinds: &[KindSpec]) -> (Vec<Problem>, String) {
    let mut problems = Vec::new();
    let sites = match crate::config::load_with_warnings(sites_path) {
        Ok((sites, warnings)) => {
            problems.extend(warnings);
            Some(sites)
        }
        Err(e) => {
            problems.extend(e.problems);
            None
        }
    };
    let mut loaded = Vec::new();
    for kind in kinds {
        match (load(&kind.path), &sites) {
            (Ok(desc), Some(sites)) => {
                problems.extend(validate(sites, &desc, kind.count));
                loaded.push((kind, desc));
            }
            (Ok(desc), None) => {
                problems.extend(description_problems(&desc));
                problems.extend(count_problem(kind.count));
            }
            (Err(e), _) => {
                problems.extend(e.problems);
                problems.extend(count_problem(kind.count));
            }
        }
    }
    let total = kinds.iter().try_fold(0u64, |sum, k| sum.checked_add(k.count.unwrap_or(0).max(0) as u64));
    let too_many = match total {
        Some(total) if kinds.len() > 1 => crate::policy::too_many_jobs(total),
        Some(_) => None,
        None => Some(crate::policy::more_jobs_than_a_run_holds("over 2^64")),
    };
    problems.extend(too_many.map(|why| Problem::error(Path::new("command line"), None, why)));
    let problems = without_repeats(problems);
    let Some(sites) = sites.filter(|_| loaded.len() == kinds.len()) else {
        return (problems, String::new());
    };
    let names: Vec<&str> = sites.sites.iter().map(|s| s.name.as_str()).collect();
    let what = match &loaded[..] {
        [(kind, desc)] if kind.name == SINGLE_TYPE => {
            format!("executable {}", desc.executable().unwrap_or("-"))
        }
        _ => {
            let each: Vec<String> = loaded
                .iter()
                .map(|(kind, desc)| {
                    let count = kind.count.map_or(String::new(), |c| format!("{c} × "));
                    format!("{count}{} ({})", kind.name, desc.executable().unwrap_or("-"))
                })
                .collect();
            format!("{} kinds: {}", loaded.len(), each.join(", "))
        }
    };
    let mut summary =
        format!("ok: {} site(s) ({}), policy {}, {what}", names.len(), names.join(", "), sites.policy.name());
    summary.push_str(&memory_keys(&loaded));
    (problems, summary)
}

/// One line per kind: the key its memory is kept under ([`kind_key`]), so
/// that a person sees which runs share what they learn; a kind whose key
/// an earlier kind of the run has is said to share it.
fn memory_keys(loaded: &[(&KindSpec, SubmitDescription)]) -> String {
    let keys: Vec<String> = loaded.iter().map(|(_, desc)| kind_key(desc)).collect();
    let mut out = String::new();
    for (i, ((kind, _), key)) in loaded.iter().zip(&keys).enumerate() {
        let whose = if loaded.len() == 1 { String::new() } else { format!(" of {}", kind.name) };
        let _ = write!(out, "\n  memory key{whose}: {key}");
        if let Some(first) = keys[..i].iter().position(|k| k == key) {
            let _ = write!(out, " (the same as {}'s: they share memory)", loaded[first].0.name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{GridResource, Severity};

    const TYPICAL: &str = "\
# A typical submit description
universe       = vanilla
executable     = analyze.sh
arguments      = --input data.$(Process) \\
                 --out result.$(CoschedJob)
transfer_input_files = data.$(Process), common.tar.gz
request_memory = 2 GB
request_cpus   = 1
+ProjectName   = \"physics\"
MY.Flavour     = \"long\"
log            = job.log
output         = out.$(CoschedJob)

queue 10
";

    fn parse_str(text: &str) -> Result<SubmitDescription, SubmitDescError> {
        parse(Path::new("/jobs/job.sub"), text)
    }

    fn grid_site() -> SiteConfig {
        SiteConfig {
            grid_resource: Some(GridResource::parse("condor ce.example.org ce.example.org:9619").unwrap()),
            submit_commands: vec![
                ("requirements".into(), "(Memory > 1024)".into()),
                ("+ProjectName".into(), "\"site-project\"".into()),
            ],
            ..SiteConfig::named("ce")
        }
    }

    #[test]
    fn parses_commands_in_order_with_continuations() {
        let d = parse_str(TYPICAL).unwrap();
        let keys: Vec<&str> = d.commands.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "universe",
                "executable",
                "arguments",
                "transfer_input_files",
                "request_memory",
                "request_cpus",
                "+ProjectName",
                "MY.Flavour",
                "log",
                "output"
            ]
        );
        let args = &d.commands[2];
        assert_eq!(args.value, "--input data.$(Process) --out result.$(CoschedJob)");
        assert_eq!((args.line, args.column), (4, 1));
        assert_eq!(d.executable(), Some("analyze.sh"));
        assert_eq!(d.get("+projectname"), Some("\"physics\""));
        assert_eq!(d.get("my.projectname"), Some("\"physics\""), "+X is MY.X");
        let q = d.queue.as_ref().unwrap();
        assert_eq!((q.count, q.line), (Some(10), 14));
        assert!(d.warnings.is_empty(), "{:?}", d.warnings);
        let w: Vec<String> = semantic_problems(&d).iter().map(|w| w.to_string()).collect();
        assert!(w.iter().any(|w| w.contains("job.sub:14:1") && w.contains("10 jobs")), "{w:?}");
        assert!(w.iter().any(|w| w.contains("job.sub:11:1") && w.contains("log")), "{w:?}");
    }

    #[test]
    fn queue_counts() {
        for (args, n) in [
            ("", Some(1)),
            ("1", Some(1)),
            ("25", Some(25)),
            ("x in (a, b, c)", Some(3)),
            ("2 x in (a b)", Some(4)),
            ("x from list.txt", None),
            ("x matching *.dat", None),
        ] {
            assert_eq!(queue_count(args, None), n, "queue {args}");
        }
        let d = parse_str("executable = /bin/true\nqueue name from (\n  a\n  b\n  c\n)\n").unwrap();
        assert_eq!(d.queue.as_ref().unwrap().count, Some(3));
    }

    #[test]
    fn syntax_errors_are_all_located() {
        let text = "executable = x\nthis is not a command\n+Bad Name = 1\ninclude : other.sub\nCoschedJob = 3\n+CoschedRun = \"mine\"\nqueue x from (\n a\n";
        let e = parse_str(text).unwrap_err();
        let errs: Vec<&Problem> = e.problems.iter().filter(|p| p.is_error()).collect();
        let lines: Vec<usize> = errs.iter().map(|p| p.location.unwrap().0).collect();
        assert_eq!(lines, [2, 3, 4, 7], "{e}");
        assert!(
            errs[0].to_string().starts_with("/jobs/job.sub:2:1: error: expected `key = value`"),
            "{}",
            errs[0]
        );
        let d =
            parse_str("executable = x\nCoschedJob = 3\n+CoschedRun = \"mine\"\nMY.coschedbatch = 1\nqueue\n")
                .unwrap();
        let lines: Vec<usize> =
            semantic_problems(&d).iter().filter(|p| p.is_error()).map(|p| p.location.unwrap().0).collect();
        assert_eq!(lines, [2, 3, 4]);
    }

    #[test]
    fn control_characters_in_values_are_refused() {
        let e = parse_str("executable = x\narguments = a\u{7}b\nqueue\n").unwrap_err();
        assert_eq!(e.problems[0].location, Some((2, 1)));
        assert!(e.problems[0].message.contains("U+0007"), "{e}");
        // A tab is ordinary whitespace in a submit file.
        assert!(parse_str("executable = x\narguments = a\tb\nqueue\n").is_ok());
    }

    #[test]
    fn heredoc_values_survive_rendering() {
        let d = parse_str("executable = /bin/sh\narguments @=end\n  -c 'echo one'\n  two\n@end\nqueue\n")
            .unwrap();
        assert_eq!(d.get("arguments"), Some("  -c 'echo one'\n  two"));
        let out = d.render_batch(&grid_site(), "r", "b", "job", &[JobId(0)], Path::new("/s/ce.log"));
        let again = parse(Path::new("/s/b.sub"), &out).unwrap();
        assert_eq!(again.get("arguments"), d.get("arguments"));
    }

    #[test]
    fn commands_after_queue_are_ignored_with_a_warning() {
        let d = parse_str("executable = x\nqueue\noutput = late\nqueue\n").unwrap();
        assert_eq!(d.get("output"), None);
        assert_eq!(d.warnings.len(), 2, "{:?}", d.warnings);
    }

    /// What the rendered file says after parsing it back, as condor_submit
    /// would read it.
    fn render_and_reparse(d: &SubmitDescription, site: &SiteConfig, jobs: &[JobId]) -> SubmitDescription {
        let out = d.render_batch(site, "run-7", "ce-b00003", "job", jobs, Path::new("/state/ce.log"));
        parse(Path::new("/state/ce-b00003.sub"), &out).unwrap_or_else(|e| panic!("{e}\n{out}"))
    }

    #[test]
    fn render_round_trips_for_a_grid_site() {
        let d = parse_str(TYPICAL).unwrap();
        let jobs = [JobId(12), JobId(3), JobId(40)];
        let r = render_and_reparse(&d, &grid_site(), &jobs);
        assert_eq!(r.get("universe"), Some("grid"));
        assert_eq!(r.get("grid_resource"), Some("condor ce.example.org ce.example.org:9619"));
        assert_eq!(r.get("log"), Some("/state/ce.log"));
        assert_eq!(r.get("executable"), Some("/jobs/analyze.sh"), "relative executables become absolute");
        assert_eq!(r.get("initialdir"), Some("/jobs"));
        assert_eq!(r.get("requirements"), Some("(Memory > 1024)"));
        assert_eq!(
            r.get("+ProjectName"),
            Some("\"site-project\""),
            "the site's command comes after the user's"
        );
        assert_eq!(r.get("+CoschedRun"), Some("\"run-7\""));
        assert_eq!(r.get("+CoschedBatch"), Some("\"ce-b00003\""));
        assert_eq!(r.get("+CoschedJob"), Some("$(CoschedJob)"));
        for key in
            ["arguments", "transfer_input_files", "request_memory", "request_cpus", "MY.Flavour", "output"]
        {
            assert_eq!(r.get(key), d.get(key), "{key} is carried over");
        }
        assert_eq!(
            r.commands.iter().filter(|c| c.normalized_key() == "log").count(),
            1,
            "the user's log is dropped"
        );
        assert_eq!(r.commands.iter().filter(|c| c.normalized_key() == "universe").count(), 1);
        let q = r.queue.unwrap();
        assert_eq!(q.count, Some(3));
        assert_eq!(q.args, "CoschedJob from (12 3 40)");
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn render_for_a_local_pool_keeps_the_users_universe() {
        let d = parse_str(
            "universe = container\ncontainer_image = img.sif\nexecutable = run\ninitialdir = work\nqueue\n",
        )
        .unwrap();
        let r = render_and_reparse(&d, &SiteConfig::named("local"), &[JobId(0)]);
        assert_eq!(r.get("universe"), Some("container"));
        assert_eq!(r.get("grid_resource"), None);
        assert_eq!(r.get("initialdir"), Some("/jobs/work"));
        let d = parse_str("executable = run\nqueue\n").unwrap();
        assert_eq!(
            render_and_reparse(&d, &SiteConfig::named("local"), &[JobId(0)]).get("universe"),
            Some("vanilla")
        );
        let d = parse_str("executable = /opt/bin/run\ntransfer_executable = false\nqueue\n").unwrap();
        assert_eq!(render_and_reparse(&d, &grid_site(), &[JobId(0)]).get("executable"), Some("/opt/bin/run"));
    }

    #[test]
    fn render_cannot_be_broken_by_identifiers() {
        let d = parse_str("executable = run\nqueue\n").unwrap();
        let out =
            d.render_batch(&grid_site(), "r\"un\nqueue 99", "b", "job", &[JobId(1)], Path::new("/s/l.log"));
        let r = parse(Path::new("/s/b.sub"), &out).unwrap();
        assert_eq!(r.get("+CoschedRun"), Some("\"r_un_queue_99\""));
        assert_eq!(r.queue.unwrap().count, Some(1));
    }

    #[test]
    fn cosched_job_gives_each_job_its_own_output() {
        let d = parse_str(TYPICAL).unwrap();
        let jobs: Vec<JobId> = [5, 6, 7, 100].into_iter().map(JobId).collect();
        let r = render_and_reparse(&d, &grid_site(), &jobs);
        let q = r.queue.as_ref().unwrap();
        let items: Vec<&str> =
            q.args.trim_start_matches("CoschedJob from (").trim_end_matches(')').split_whitespace().collect();
        assert_eq!(items.len(), jobs.len());
        let mut outputs = std::collections::BTreeSet::new();
        for (process, item) in items.iter().enumerate() {
            let lookup = |name: &str| match name {
                "coschedjob" => Some(item.to_string()),
                "process" => Some(process.to_string()),
                _ => None,
            };
            let output = expand_macros(r.get("output").unwrap(), &lookup);
            assert_eq!(output, format!("out.{item}"));
            outputs.insert(output);
        }
        assert_eq!(outputs.len(), jobs.len(), "every job writes its own output");
        // The same job in another batch (a resubmission) writes the same file.
        let again = render_and_reparse(&d, &SiteConfig::named("local"), &[JobId(7)]);
        let lookup = |name: &str| (name == "coschedjob").then(|| "7".to_string());
        assert_eq!(expand_macros(again.get("output").unwrap(), &lookup), "out.7");
    }

    #[test]
    fn a_batch_carries_its_kind_as_a_macro_and_an_attribute() {
        let d = parse_str("executable = run\narguments = $(CoschedType) $(CoschedJob)\nqueue\n").unwrap();
        let out = d.render_batch(&grid_site(), "r", "b", "io", &[JobId(4)], Path::new("/s/ce.log"));
        let r = parse(Path::new("/s/b.sub"), &out).unwrap();
        assert_eq!(r.get("+CoschedType"), Some("\"io\""));
        let first = r.commands.first().map(|c| (c.key.as_str(), c.value.as_str()));
        assert_eq!(first, Some(("CoschedType", "io")), "defined before the user's commands use it");
        let lookup = |name: &str| match name {
            "coschedtype" => r.get("CoschedType").map(str::to_string),
            "coschedjob" => Some("4".to_string()),
            _ => None,
        };
        assert_eq!(expand_macros(r.get("arguments").unwrap(), &lookup), "io 4");
        let odd = d.render_batch(&grid_site(), "r", "b", "a\nqueue 9", &[JobId(4)], Path::new("/s/ce.log"));
        assert_eq!(parse(Path::new("/s/b.sub"), &odd).unwrap().queue.unwrap().count, Some(1));
    }

    #[test]
    fn jobs_arguments_name_a_count_and_a_file() {
        let k = KindSpec::parse("io=400:dir/io.sub").unwrap();
        assert_eq!((k.name.as_str(), k.count, k.path.as_path()), ("io", Some(400), Path::new("dir/io.sub")));
        let k = KindSpec::parse("25:jobs/cpu-heavy.v2.sub").unwrap();
        assert_eq!((k.name.as_str(), k.count), ("cpu-heavy.v2", Some(25)), "named after the file's stem");
        let k = KindSpec::parse("x=1:a:b.sub").unwrap();
        assert_eq!(k.path, Path::new("a:b.sub"), "only the first `:` separates");
        for (bad, why) in [
            ("io.sub", "expected [NAME=]COUNT:FILE"),
            ("io=:io.sub", "not a whole number"),
            ("io=ten:io.sub", "not a whole number"),
            ("io=-2:io.sub", "at least 1"),
            ("io=3:", "no submit description"),
            ("=3:io.sub", "needs a name"),
            ("9io=3:io.sub", "cannot name"),
            ("3:.hidden", "cannot name"),
            ("3:my job.sub", "NAME=3:my job.sub"),
        ] {
            let err = KindSpec::parse(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let dup = [KindSpec::parse("a=1:x.sub").unwrap(), KindSpec::parse("2:a.sub").unwrap()];
        assert!(duplicate_kind(&dup).is_some_and(|e| e.contains("`a`")));
        assert_eq!(duplicate_kind(&dup[..1]), None);
    }

    #[test]
    fn kinds_are_interleaved_and_each_has_its_description() {
        let io = parse_str("executable = io\nqueue\n").unwrap();
        let cpu = parse_str("executable = cpu\nqueue\n").unwrap();
        let kinds = JobKinds::new(vec![("io".into(), 1, io.clone()), ("cpu".into(), 3, cpu)]).unwrap();
        let exes: Vec<&str> =
            (0..4).map(|j| kinds.desc(kinds.types().of(JobId(j))).executable().unwrap()).collect();
        assert_eq!(exes, ["cpu", "io", "cpu", "cpu"]);
        assert_eq!(kinds.n_jobs(), 4);
        let err = JobKinds::new(vec![("io".into(), 1, io.clone()), ("io".into(), 2, io)]).unwrap_err();
        assert!(err.contains("two kinds"), "{err}");
    }

    #[test]
    fn expand_macros_defaults_and_unknowns() {
        let lookup = |name: &str| (name == "a").then(|| "1".to_string());
        assert_eq!(expand_macros("x$(A)y$(B:2)z$(C)$(", &lookup), "x1y2z$(C)$(");
    }

    fn sites_with(site: SiteConfig) -> SitesFile {
        SitesFile {
            path: PathBuf::from("sites.toml"),
            policy: crate::policy::PolicyConfig::named("bulk").expect("bulk is a policy"),
            condor: Default::default(),
            run: Default::default(),
            simulate: Default::default(),
            sites: vec![site],
        }
    }

    #[test]
    fn a_file_named_by_a_batchs_own_numbering_is_told_with_the_macro_it_uses() {
        // HTCondor 25.0, `queue CoschedJob from (7 9)`: $(ItemIndex) and
        // $(Row) are 0 and 1 in every batch, as $(Process) is.
        let told = |value: &str| -> Vec<Problem> {
            let d = parse_str(&format!("output = {value}\nqueue\n")).unwrap();
            semantic_problems(&d).into_iter().filter(|p| p.message.contains("names files by")).collect()
        };
        for (value, says) in [
            ("out.$(itemindex)", "by $(itemindex), which repeats across"),
            ("o/$(Row).txt", "by $(Row), which repeats across"),
            ("o.$(ClusterId)", "which every job of a batch shares"),
            ("o.$(Cluster).$(Process)", "by $(Cluster) and $(Process), which name an attempt, not a job"),
        ] {
            let found = told(value);
            assert_eq!(found.len(), 1, "{value}: {found:?}");
            assert!(found[0].message.contains(says), "{value}: {}", found[0].message);
            assert!(found[0].hint.as_deref().unwrap_or("").contains("$(CoschedJob)"), "{:?}", found[0].hint);
        }
        assert!(told("out.$(CoschedJob)").is_empty());
    }

    #[test]
    fn validate_checks_executable_and_n() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("run.sh"), "#!/bin/sh\n").unwrap();
        let job = dir.path().join("job.sub");
        let sites = sites_with(grid_site());
        let errors = |text: &str, n: Option<i64>| -> Vec<Problem> {
            let d = parse(&job, text).unwrap();
            validate(&sites, &d, n).into_iter().filter(|p| p.severity == Severity::Error).collect()
        };
        assert!(errors("executable = run.sh\nqueue\n", Some(5)).is_empty());
        let e = errors("executable = missing.sh\nqueue\n", Some(5));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].location, Some((1, 1)));
        assert!(e[0].message.contains("missing.sh"), "{}", e[0]);
        assert!(errors("executable = missing.sh\ntransfer_executable = False\nqueue\n", None).is_empty());
        assert_eq!(errors("arguments = 1\nqueue\n", None).len(), 1, "no executable");
        assert_eq!(errors("executable = run.sh\nqueue\n", Some(0)).len(), 1);
        assert_eq!(errors("executable = run.sh\nqueue\n", Some(-3)).len(), 1);
        let mut bad = grid_site();
        bad.name = "a\nb".into();
        bad.submit_commands.push(("universe".into(), "x".into()));
        let d = parse(&job, "executable = run.sh\nqueue\n").unwrap();
        assert_eq!(validate(&sites_with(bad), &d, None).iter().filter(|p| p.is_error()).count(), 2);
    }
}
