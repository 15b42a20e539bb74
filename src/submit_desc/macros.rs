//! The macros a description uses, checked before anything is submitted.
//!
//! `condor_submit` expands a macro that neither the description nor the
//! HTCondor configuration defines to nothing, and says nothing (HTCondor
//! 25.0: `output = out.$(CoschedJb)` gives every job `Out = "out."`). In a
//! file name that is every job writing one file, each overwriting the one
//! before: outputs lost, found out after the run. So `check` (and `submit`,
//! before it sends anything) warns where a description
//!
//! - uses a macro it does not define and that is not one `condor_submit` or
//!   cosched defines for every job: a misspelling of one of those (or of
//!   the description's own) is named as such, anything else may still come
//!   from the HTCondor configuration (`$(ARCH)`), which cosched does not
//!   read, so it is told, not refused;
//! - sends every job's standard output or error to one file: `output` and
//!   `error` name nothing that differs from job to job, and neither does
//!   `initialdir`, which a relative name is relative to.
//!
//! Macros are compared case-insensitively, as HTCondor compares them.

use super::{Command, SubmitDescription};
use crate::config::Problem;

/// Macros whose value differs between the jobs of one batch, as HTCondor's
/// manual writes them (macros compare case-insensitively). A file named by
/// none of them is every job's. Only `CoschedJob` also differs between
/// batches and sites: the others number a batch's jobs, or the batch, and
/// repeat (HTCondor 25.0, `queue CoschedJob from (7 9)`: `$(ItemIndex)` and
/// `$(Row)` are 0 and 1 in every batch, as `$(Process)` is), which
/// `submit_desc` tells where they name files.
const PER_JOB_MACROS: [&str; 7] =
    ["CoschedJob", "Process", "ProcId", "ItemIndex", "Row", "Cluster", "ClusterId"];

/// The other macros defined for every job, with one value for all the jobs
/// of a submission (or, for `CoschedType`, of a kind): `$(Step)` is 0 under
/// cosched's queue statement.
const SUBMIT_MACROS: [&str; 8] =
    ["SUBMIT_FILE", "SUBMIT_TIME", "YEAR", "MONTH", "DAY", "DOLLARDOLLAR", "Step", "CoschedType"];

/// Macros a user's own queue statement (or DAGMan) would define, and that
/// are empty under cosched's: `$(Item)` is the variable of a `queue … from`
/// that does not name one, and cosched's names `CoschedJob`; `$(Node)` is
/// DAGMan's and the parallel universe's (HTCondor 25.0: both expand to
/// nothing).
const EMPTY_UNDER_COSCHED: [&str; 2] = ["Item", "Node"];

fn is_per_job(name: &str) -> bool {
    PER_JOB_MACROS.iter().any(|m| m.eq_ignore_ascii_case(name))
}

fn is_condor_submits(name: &str) -> bool {
    is_per_job(name) || SUBMIT_MACROS.iter().any(|m| m.eq_ignore_ascii_case(name))
}

/// The commands that name a job's standard streams on the submit host.
const STREAM_KEYS: [(&str, &str); 2] = [("output", "standard output"), ("error", "standard error")];

/// Edits (insertions, deletions, substitutions) within which an unknown
/// macro is taken for a misspelling of a known one. Two catch a dropped and
/// a swapped letter (`CoschedJb`, `Porcess`) and, at four letters or more,
/// rarely join two real names.
const MISSPELT_WITHIN: usize = 2;

/// `value` with the description's own macros replaced by their values (a
/// few rounds, for macros defined by macros); the per-job ones, and any the
/// description does not define, are left as written.
pub(super) fn expand_user_macros(desc: &SubmitDescription, value: &str) -> String {
    let lookup = |name: &str| {
        if is_condor_submits(name) {
            return None;
        }
        defined_here(desc, name).map(str::to_string)
    };
    let mut text = value.to_string();
    for _ in 0..8 {
        let next = super::expand_macros(&text, &lookup);
        if next == text {
            break;
        }
        text = next;
    }
    text
}

/// What is wrong with the macros `desc` uses (the module doc).
pub(super) fn macro_problems(desc: &SubmitDescription) -> Vec<Problem> {
    let mut problems = Vec::new();
    for c in &desc.commands {
        let mut told = Vec::new();
        for name in undefined_macros(desc, &c.value) {
            if !told.contains(&name) {
                problems.push(undefined_problem(desc, c, &name));
                told.push(name);
            }
        }
    }
    let initialdir_per_job = desc.get("initialdir").is_some_and(|dir| names_per_job(desc, dir));
    for (key, stream) in STREAM_KEYS {
        let Some(c) = desc.get_command(key) else { continue };
        let value = c.value.trim();
        // A name with a macro that is not defined is told above, with its fix.
        let told_above = !undefined_macros(desc, value).is_empty();
        if value.is_empty()
            || value == "/dev/null"
            || initialdir_per_job
            || told_above
            || names_per_job(desc, value)
        {
            continue;
        }
        problems.push(
            Problem::warning(
                &desc.path,
                Some((c.line, c.column)),
                format!(
                    "`{} = {value}`: every job writes its {stream} to this one file, each overwriting the one before",
                    c.key
                ),
            )
            .with_hint(format!(
                "name it by the job's index, `{} = {value}.$(CoschedJob)`, or drop it with `/dev/null`",
                c.key
            )),
        );
    }
    problems
}

fn undefined_problem(desc: &SubmitDescription, c: &Command, name: &str) -> Problem {
    let at = Some((c.line, c.column));
    let lower = name.to_ascii_lowercase();
    // Known names as written: the description's own, then HTCondor's.
    let own = desc.commands.iter().filter(|d| is_macro_definition(d)).map(|d| d.key.as_str());
    if let Some(m) = EMPTY_UNDER_COSCHED.iter().find(|m| m.eq_ignore_ascii_case(name)) {
        let whose = if *m == "Item" { "a queue statement's" } else { "DAGMan's" };
        return Problem::warning(
            &desc.path,
            at,
            format!(
                "`$({name})` is {whose}, and cosched writes the queue statement: condor_submit expands \
                 it to nothing, in every job"
            ),
        )
        .with_hint("number jobs by `$(CoschedJob)`, the job's index over the whole run");
    }
    let nearest = own
        .chain(PER_JOB_MACROS)
        .chain(SUBMIT_MACROS)
        .map(|m| (edit_distance(&lower, &m.to_ascii_lowercase()), m))
        .filter(|&(d, _)| lower.len() >= 4 && d <= MISSPELT_WITHIN)
        .min_by_key(|&(d, _)| d);
    match nearest {
        Some((_, m)) => Problem::warning(
            &desc.path,
            at,
            format!("`$({name})` is not defined: condor_submit expands it to nothing, in every job"),
        )
        .with_hint(format!("did you mean `$({m})`?")),
        None => Problem::warning(
            &desc.path,
            at,
            format!(
                "`$({name})` is not defined here nor by condor_submit: it comes from the HTCondor \
                 configuration if that defines it, else it expands to nothing"
            ),
        )
        .with_hint(format!("define it (`{name} = …`) or give it a default: `$({name}:value)`")),
    }
}

/// The macros `value` uses that are defined nowhere cosched can see, as
/// written. A reference with a default (`$(X:d)`) is always defined;
/// `$$(X)` is a match-time reference, not a macro.
fn undefined_macros(desc: &SubmitDescription, value: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut at = 0;
    while let Some(found) = value[at..].find("$(") {
        let start = at + found;
        let after = start + 2;
        let Some(len) = value[after..].find(')') else { break };
        at = after + len + 1;
        if value[..start].ends_with('$') {
            continue;
        }
        let inner = &value[after..after + len];
        if inner.contains(':') || !is_identifier(inner) {
            continue;
        }
        if !is_condor_submits(inner) && defined_here(desc, inner).is_none() {
            names.push(inner.to_string());
        }
    }
    names
}

/// Whether `value`, with the description's own macros expanded, names
/// something that differs from job to job.
fn names_per_job(desc: &SubmitDescription, value: &str) -> bool {
    let expanded = expand_user_macros(desc, value).to_ascii_lowercase();
    PER_JOB_MACROS.iter().any(|m| expanded.contains(&format!("$({})", m.to_ascii_lowercase())))
}

/// The value of the description's own macro `name`, if it defines one
/// (`MY.x` names the attribute `+x` sets).
fn defined_here<'d>(desc: &'d SubmitDescription, name: &str) -> Option<&'d str> {
    desc.get(name)
}

/// A plain `key = value` defines a macro; `+Attr` and `MY.Attr` set job
/// attributes only.
fn is_macro_definition(c: &Command) -> bool {
    !c.normalized_key().starts_with("my.")
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '.')
}

/// Levenshtein's distance between two ASCII-lowered names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn problems(text: &str) -> Vec<String> {
        let desc = super::super::parse(Path::new("/d/job.sub"), text).expect("parses");
        macro_problems(&desc)
            .iter()
            .map(|p| format!("{} | {}", p.message, p.hint.clone().unwrap_or_default()))
            .collect()
    }

    #[test]
    fn a_misspelt_job_index_is_named_with_its_fix() {
        let found = problems("executable = run\noutput = out.$(CoschedJb)\nqueue\n");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("`$(CoschedJb)` is not defined") && found[0].contains("in every job"));
        assert!(found[0].contains("did you mean `$(CoschedJob)`?"), "{found:?}");
    }

    #[test]
    fn a_misspelling_of_the_descriptions_own_macro_is_named_as_written_there() {
        let found = problems("Dataset = run7\narguments = --in $(Datset)\nqueue\n");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("did you mean `$(Dataset)`?"), "{found:?}");
    }

    #[test]
    fn macros_defined_here_by_condor_submit_by_cosched_or_with_a_default_are_not_told() {
        let text = "base = out/$(CoschedJob)\noutput = $(base).out\nerror = $(BASE).err\n\
                    arguments = $(Process) $(cluster) $(CoschedType) $(SUBMIT_FILE) $(Threads:4) $$(Memory)\n\
                    +Tag = \"$(year)\"\nqueue\n";
        assert_eq!(problems(text), Vec::<String>::new());
    }

    #[test]
    fn a_macro_from_nowhere_cosched_sees_is_told_not_refused() {
        let desc =
            super::super::parse(Path::new("/d/job.sub"), "requirements = Arch == \"$(ARCH)\"\nqueue\n")
                .unwrap();
        let found = macro_problems(&desc);
        assert_eq!(found.len(), 1);
        assert!(!found[0].is_error(), "a configuration's macro is the user's to judge");
        assert!(found[0].message.contains("HTCondor configuration"), "{}", found[0].message);
    }

    #[test]
    fn one_stream_file_for_every_job_is_told_unless_a_per_job_directory_or_dev_null_separates_them() {
        let found = problems("output = out.txt\nerror = /dev/null\nqueue\n");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("`output = out.txt`") && found[0].contains("out.txt.$(CoschedJob)"));
        assert_eq!(
            problems("initialdir = run$(CoschedJob)\noutput = out.txt\nerror = err.txt\nqueue\n"),
            Vec::<String>::new()
        );
        let dir = "dir = jobs/$(CoschedJob)\ninitialdir = $(dir)\noutput = out.txt\nqueue\n";
        assert_eq!(problems(dir), Vec::<String>::new());
    }

    #[test]
    fn a_queue_statements_item_and_dagmans_node_are_told_empty_under_coscheds_queue() {
        let found = problems("arguments = $(Item) $(node)\nqueue\n");
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("`$(Item)` is a queue statement's") && found[0].contains("$(CoschedJob)"));
        assert!(found[1].contains("`$(node)` is DAGMan's"), "{found:?}");
        // A description that defines them itself is not told.
        assert_eq!(
            problems("Item = a\nNode = b\narguments = $(Item) $(Node)\nqueue\n"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_stream_named_by_step_or_by_the_kind_alone_is_every_jobs() {
        for name in ["out.$(Step)", "out.$(CoschedType)"] {
            let found = problems(&format!("output = {name}\nqueue\n"));
            assert_eq!(found.len(), 1, "{name}: {found:?}");
            assert!(found[0].contains("every job writes its standard output"), "{found:?}");
        }
        assert_eq!(
            problems("output = out.$(ItemIndex)\nqueue\n"),
            Vec::<String>::new(),
            "told by submit_desc"
        );
    }

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("coschedjb", "coschedjob"), 1);
        assert_eq!(edit_distance("porcess", "process"), 2);
        assert_eq!(edit_distance("", "row"), 3);
        assert_eq!(edit_distance("item", "item"), 0);
    }
}
