//! The files a description names on the submit host, checked before
//! anything is submitted: what `condor_submit` would refuse, or what would
//! have every job held, is said at its line with the fix, rather than found
//! out from the first batch.
//!
//! - The executable must exist and be a file. A script with DOS line ends
//!   is refused by `condor_submit` ("a script with CRLF line endings"), so
//!   it is an error here. One without execute permission is a warning: a
//!   job started from it in place is held ("Permission denied", HTCondor
//!   25.0 on a local pool); whether a site that transfers it sets the mode
//!   was not measured, so it is not refused.
//! - `input` and `transfer_input_files` must exist unless
//!   `should_transfer_files = NO` (then they are read on the execute side's
//!   filesystem): where the files are transferred, a missing one holds the
//!   job ("Transfer input files failure", HTCondor 25.0 with
//!   `should_transfer_files = YES`). Names with a macro (one job's file)
//!   and URLs (the execute side's to fetch) are not checked.
//!
//! Relative names are relative to `initialdir`, itself relative to the
//! description's directory, as `condor_submit` takes them.

use super::{Command, SubmitDescription};
use crate::config::Problem;
use std::io::Read;
use std::path::{Path, PathBuf};

/// What is wrong with the files `desc` names (the module doc).
pub(super) fn file_problems(desc: &SubmitDescription) -> Vec<Problem> {
    let mut problems = executable_problems(desc);
    // Without file transfer the inputs are read on the execute side's
    // filesystem, which the submit host need not see.
    let transfers = desc.get("should_transfer_files").is_none_or(|v| !v.trim().eq_ignore_ascii_case("no"));
    let Some(dir) = input_dir(desc).filter(|_| transfers) else { return problems };
    for key in ["input", "transfer_input_files"] {
        let Some(c) = desc.get_command(key) else { continue };
        for name in c.value.split(',').map(str::trim) {
            if name.is_empty() || name == "/dev/null" || name.contains("$(") || name.contains("://") {
                continue;
            }
            let path = dir.join(name.trim_end_matches('/'));
            if let Err(e) = std::fs::metadata(&path) {
                problems.push(
                    Problem::error(
                        &desc.path,
                        Some((c.line, c.column)),
                        format!("`{}` names `{}`: {}", c.key, path.display(), io_reason(&e)),
                    )
                    .with_hint(
                        "a relative name is relative to `initialdir` (else to the submit description's \
                         directory); where files are transferred, a missing one holds every job",
                    ),
                );
            }
        }
    }
    problems
}

fn executable_problems(desc: &SubmitDescription) -> Vec<Problem> {
    let path = desc.path.as_path();
    let Some(c) = desc.get_command("executable") else {
        return vec![Problem::error(path, None, "no executable")
            .with_hint("add `executable = path/to/program` (relative to the submit description)")];
    };
    let at = Some((c.line, c.column));
    if c.value.is_empty() {
        return vec![Problem::error(path, at, "the executable is empty")];
    }
    if c.value.contains("$(") {
        return vec![Problem::warning(
            path,
            at,
            format!("executable `{}` uses a macro; cosched cannot check that it exists", c.value),
        )];
    }
    if !desc.transfers_executable() {
        if Path::new(&c.value).is_absolute() {
            return Vec::new();
        }
        return vec![Problem::warning(
            path,
            at,
            format!("executable `{}` is not transferred (transfer_executable = false) and is not an absolute path", c.value),
        )];
    }
    let exe = desc.dir.join(&c.value);
    match std::fs::metadata(&exe) {
        Ok(m) if m.is_file() => program_problems(desc, c, &exe, &m),
        Ok(_) => vec![Problem::error(path, at, format!("executable `{}` is not a file", exe.display()))],
        Err(e) => vec![Problem::error(path, at, format!("cannot access executable `{}`: {}", exe.display(), io_reason(&e)))
            .with_hint("a relative executable is relative to the submit description's directory; set `transfer_executable = false` for a program that exists only on the execute hosts")],
    }
}

/// A program that exists: a script `condor_submit` refuses, or one a job
/// cannot start in place.
fn program_problems(
    desc: &SubmitDescription,
    c: &Command,
    exe: &Path,
    meta: &std::fs::Metadata,
) -> Vec<Problem> {
    use std::os::unix::fs::PermissionsExt;
    let at = Some((c.line, c.column));
    let mut problems = Vec::new();
    if script_with_crlf(exe) {
        problems.push(
            Problem::error(
                &desc.path,
                at,
                format!(
                    "executable `{}` is a script with DOS (CRLF) line ends: condor_submit refuses it",
                    exe.display()
                ),
            )
            .with_hint(format!("convert it: `dos2unix {}`", exe.display())),
        );
    }
    if meta.permissions().mode() & 0o111 == 0 {
        problems.push(
            Problem::warning(
                &desc.path,
                at,
                format!("executable `{}` is not executable: a job started from it in place is held (permission denied)", exe.display()),
            )
            .with_hint(format!("`chmod +x {}`", exe.display())),
        );
    }
    problems
}

/// Whether `exe` starts `#!` and its first line ends in `\r`, which the
/// kernel would take for part of the interpreter's name.
fn script_with_crlf(exe: &Path) -> bool {
    let mut head = Vec::with_capacity(512);
    let read = std::fs::File::open(exe).and_then(|f| f.take(4096).read_to_end(&mut head));
    if read.is_err() || !head.starts_with(b"#!") {
        return false;
    }
    head.split(|&b| b == b'\n').next().is_some_and(|line| line.ends_with(b"\r"))
}

/// Where relative input names point: `initialdir` against the description's
/// directory; `None` where `initialdir` differs from job to job.
fn input_dir(desc: &SubmitDescription) -> Option<PathBuf> {
    let initialdir = desc.get("initialdir");
    (!initialdir.is_some_and(|dir| dir.contains("$("))).then(|| job_dir(desc, initialdir))
}

/// A job's directory on the submit host, where its relative input names
/// point: `initialdir` (the text `initialdir`, macros as written) against
/// the description's directory, else that directory.
pub(super) fn job_dir(desc: &SubmitDescription, initialdir: Option<&str>) -> PathBuf {
    match initialdir {
        Some(dir) => desc.dir.join(dir),
        None => desc.dir.clone(),
    }
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The problems of `text` as a description in a directory holding
    /// `files` (name, content, mode).
    fn problems(text: &str, files: &[(&str, &str, u32)]) -> Vec<(bool, String)> {
        let dir = tempfile::tempdir().unwrap();
        for (name, content, mode) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, content).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode)).unwrap();
        }
        let desc = super::super::parse(&dir.path().join("job.sub"), text).expect("parses");
        file_problems(&desc)
            .iter()
            .map(|p| (p.is_error(), format!("{} | {}", p.message, p.hint.clone().unwrap_or_default())))
            .collect()
    }

    #[test]
    fn a_script_with_dos_line_ends_is_an_error_as_condor_submit_makes_it() {
        let found =
            problems("executable = run.sh\nqueue\n", &[("run.sh", "#!/bin/sh\r\necho hi\r\n", 0o755)]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].0 && found[0].1.contains("CRLF") && found[0].1.contains("dos2unix"), "{found:?}");
        let binary = problems("executable = run\nqueue\n", &[("run", "\x7fELF\r\n\0", 0o755)]);
        assert_eq!(binary, vec![], "only a script's first line is read by the kernel");
    }

    #[test]
    fn a_program_without_execute_permission_is_a_warning_with_its_chmod() {
        let found = problems("executable = run.sh\nqueue\n", &[("run.sh", "#!/bin/sh\necho hi\n", 0o644)]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(!found[0].0 && found[0].1.contains("chmod +x"), "{found:?}");
    }

    #[test]
    fn missing_inputs_are_errors_but_one_jobs_file_a_url_or_a_per_job_directory_are_not_checked() {
        let files = [("run.sh", "#!/bin/sh\n", 0o755), ("data/common.tar", "", 0o644)];
        let text = "executable = run.sh\ninput = in.txt\n\
                    transfer_input_files = data/common.tar, data/, data/part.$(CoschedJob), https://x.org/a, lost.dat\nqueue\n";
        let found = problems(text, &files);
        let errors: Vec<&str> = found.iter().filter(|(error, _)| *error).map(|(_, m)| m.as_str()).collect();
        assert_eq!(errors.len(), 2, "{found:?}");
        assert!(errors[0].starts_with("`input` names") && errors[0].contains("in.txt"), "{errors:?}");
        assert!(errors[1].contains("lost.dat`: no such file"), "{errors:?}");
        let moved = "executable = run.sh\ninitialdir = data\ntransfer_input_files = common.tar\nqueue\n";
        assert_eq!(problems(moved, &files), vec![], "relative to initialdir");
        let per_job =
            "executable = run.sh\ninitialdir = job$(CoschedJob)\ntransfer_input_files = in.txt\nqueue\n";
        assert_eq!(problems(per_job, &files), vec![]);
        let shared = "executable = run.sh\nshould_transfer_files = NO\ninput = /cluster/in.txt\nqueue\n";
        assert_eq!(problems(shared, &files), vec![], "read where the job runs");
    }
}
