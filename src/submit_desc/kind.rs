//! Which kind of job a submit description is, across runs: the key its
//! memory is kept under (`policy::memory`), so that the same job (the same
//! program and files, whatever directory its description is in) starts
//! from what the last run learned, and a different job at the same site
//! does not inherit its knee. A copy of the program elsewhere is another
//! program: to share memory between copies, name the kind.
//!
//! - A user may name the kind: `+CoschedKind = "name"` (or
//!   `MY.CoschedKind`), a job attribute like any other (it reaches the job
//!   ads, so `condor_q -af CoschedKind` shows it). Descriptions with the
//!   same name share memory whatever else they say: a name is for a job
//!   whose arguments change from run to run but whose load does not. The
//!   key is `name:NAME`.
//! - Otherwise the kind is the fingerprint of what makes a job load a site
//!   the way it does, as `condor_submit` reads it: `executable`,
//!   `arguments`, `input`, `transfer_input_files` and every `request_*`
//!   command, as their last assignment says (user macros expanded;
//!   `$(CoschedJob)`, `$(Process)` and the other per-job macros left as
//!   written, so every job of a run and every run have the same text).
//!   Two ways of writing one job are one kind (`values` says how each is
//!   read):
//!   - the executable and the input files are the files they name on the
//!     submit host: absolute, normalised paths (`./job.sh`, `job.sh` and
//!     `/d/job.sh` next to `/d/job.sub` are one file; `run.sh` next to
//!     `A/job.sub` and next to `B/job.sub` are two). A relative executable
//!     is relative to the description's directory (cosched submits it so),
//!     an input file to `initialdir`, itself relative to the description's
//!     directory (`files`). An executable that is not transferred is the
//!     execute side's path, as written. A URL, or a name that starts with
//!     a macro (which may expand to an absolute path), counts as written.
//!     Only names count, never contents: a program rebuilt keeps its kind,
//!     and its knee;
//!   - `arguments` is its words, in either of HTCondor's syntaxes
//!     (`a b` and `"a b"` are one kind, `"'a b'"` another);
//!   - `request_memory` counts in MiB and `request_disk` in KiB, HTCondor's
//!     units (`256M`, `256 MB`, `0.25G` and `256` are one memory); other
//!     `request_*` values, and expressions, count as written;
//!   - the input files are a set (order and repeats do not count), the
//!     commands are taken in name order whatever their order in the file,
//!     whitespace runs count as one space, and nothing else counts
//!     (`output`, `error`, `log`, comments, the description's own path).
//!
//!   The key is `fp2:` and the FNV-1a 128-bit hash of that canonical text
//!   in hex (`2` is the canonical form's version: a new form is a new
//!   prefix, never the same key with another meaning). `fp1:` keys, of the
//!   form that took the text as written, are no kind's any more: memory
//!   kept under one is a new kind's first run (what is the site's still
//!   carries over), and `cosched memory` shows and forgets it.
//!
//! - A run told its jobs are of one kind (`cosched submit --blind-types`)
//!   learns about its mix as a whole: its key is `blind:` and its kinds'
//!   keys in kind order, joined by `+`, never one of its kinds' own.

mod values;

use super::files::job_dir;
use super::macros::expand_user_macros;
use super::{Command, SubmitDescription};
use crate::config::Problem;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The prefix of a fingerprint's key: its canonical form's version.
pub const FINGERPRINT: &str = "fp2:";

/// The job attribute that names a kind (normalized: `+X` is `my.x`).
pub(super) const KIND_ATTR: &str = "my.coschedkind";

/// Longest kind name.
const MAX_NAME: usize = 64;

/// The memory key of `desc`'s kind (see the module doc).
pub fn kind_key(desc: &SubmitDescription) -> String {
    match user_kind(desc) {
        Some(Ok(name)) => format!("name:{name}"),
        // An invalid name is an error `check` reports before any run.
        Some(Err(_)) | None => format!("{FINGERPRINT}{:032x}", fnv1a_128(canonical(desc).as_bytes())),
    }
}

/// The memory key of a run of `keys` (its kinds' keys, in kind order) run
/// blind to kinds.
pub fn blind_kind_key(keys: &[String]) -> String {
    format!("blind:{}", keys.join("+"))
}

/// What is wrong with the kind's name, if the description gives one.
pub(super) fn kind_problems(desc: &SubmitDescription) -> Vec<Problem> {
    match user_kind(desc) {
        Some(Err((c, why))) => {
            vec![Problem::error(&desc.path, Some((c.line, c.column)), why).with_hint(format!(
                "name the kind with a quoted string of letters, digits, `.`, `_` and `-` (at most \
                 {MAX_NAME}): `{} = \"my-analysis\"`",
                c.key
            ))]
        }
        _ => Vec::new(),
    }
}

/// The name the description gives its kind, if any.
fn user_kind(desc: &SubmitDescription) -> Option<Result<&str, (&Command, String)>> {
    let c = desc.get_command(KIND_ATTR)?;
    let value = c.value.trim();
    let Some(name) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
        return Some(Err((c, format!("`{} = {value}`: the kind's name must be a quoted string", c.key))));
    };
    let valid = |ch: char| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(valid) {
        return Some(Err((c, format!("`{} = {value}`: not a kind name cosched accepts", c.key))));
    }
    Some(Ok(name))
}

/// One `key=value` line per command that makes the kind, in key order,
/// each value as `condor_submit` reads it (see the module doc).
fn canonical(desc: &SubmitDescription) -> String {
    let counts = |key: &str| {
        matches!(key, "executable" | "arguments" | "input" | "transfer_input_files")
            || key.starts_with("request_")
    };
    // The last assignment of a key is the one HTCondor uses.
    let mut chosen: BTreeMap<String, &str> = BTreeMap::new();
    for c in &desc.commands {
        let key = c.normalized_key();
        if counts(&key) {
            chosen.insert(key, &c.value);
        }
    }
    let initialdir = desc.get("initialdir").map(|dir| expand_user_macros(desc, dir));
    let inputs_dir = job_dir(desc, initialdir.as_deref());
    let mut text = String::new();
    for (key, value) in chosen {
        let value = expand_user_macros(desc, value);
        if value.trim().is_empty() {
            continue; // as if not given: `arguments =` passes none
        }
        let value = match key.as_str() {
            "executable" if desc.transfers_executable() => file_name(&desc.dir, value.trim()),
            "input" => file_name(&inputs_dir, value.trim()),
            "transfer_input_files" => {
                let files: BTreeSet<String> = value
                    .split(',')
                    .map(str::trim)
                    .filter(|f| !f.is_empty())
                    .map(|f| file_name(&inputs_dir, f))
                    .collect();
                json_list(files)
            }
            "arguments" => match values::argument_words(&value) {
                Some(words) => json_list(words),
                // condor_submit refuses it (and says why): kept as written.
                None => one_spaced(&value),
            },
            "request_memory" => quantity_or_text(&value, 1 << 20),
            "request_disk" => quantity_or_text(&value, 1 << 10),
            _ => one_spaced(&value),
        };
        if value == "[]" {
            continue; // `arguments = ""`: none either
        }
        text.push_str(&key);
        text.push('=');
        text.push_str(&value);
        text.push('\n');
    }
    text
}

/// A file `name` names on the submit host, relative names against `dir`
/// (see the module doc for what counts as written).
fn file_name(dir: &Path, name: &str) -> String {
    if name.contains("://") || name.starts_with("$(") {
        name.to_string()
    } else {
        values::absolute_path(dir, name)
    }
}

/// A quantity in HTCondor's unit of `base` bytes, or an expression as written.
fn quantity_or_text(value: &str, base: u64) -> String {
    values::quantity(value, base).map_or_else(|| one_spaced(value), |n| n.to_string())
}

/// `value` with each run of whitespace one space.
fn one_spaced(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A JSON list of `items`: words or names, each whole whatever it holds.
fn json_list(items: impl IntoIterator<Item = String>) -> String {
    serde_json::to_string(&items.into_iter().collect::<Vec<_>>()).unwrap_or_default()
}

/// FNV-1a, 128 bits: stable across builds and platforms (the standard
/// library's hashers promise neither), and enough bits that a user's kinds
/// never collide by chance.
fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    bytes.iter().fold(OFFSET, |h, &b| (h ^ u128::from(b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn key(text: &str) -> String {
        key_at("/d/job.sub", text)
    }

    /// The key of `text` as the description at `path`.
    fn key_at(path: &str, text: &str) -> String {
        kind_key(&super::super::parse(Path::new(path), text).expect("parses"))
    }

    /// Each of `ways` is one job written another way: one key; each of
    /// `others` is another job: a key of its own.
    fn check(ways: &[(&str, &str)], others: &[(&str, &str)]) {
        let first = key_at(ways[0].0, ways[0].1);
        for (path, text) in ways {
            assert_eq!(key_at(path, text), first, "{path}: {text:?} is {:?}", ways[0]);
        }
        let mut seen = vec![first];
        for (path, text) in others {
            let k = key_at(path, text);
            assert!(!seen.contains(&k), "{path}: {text:?} shares a key with one before it");
            seen.push(k);
        }
    }

    #[test]
    fn an_executable_is_the_file_it_names_not_its_text() {
        check(
            &[
                ("/d/job.sub", "executable = job.sh\n"),
                ("/d/job.sub", "executable = ./job.sh\n"),
                ("/d/job.sub", "executable = /d/job.sh\n"),
                ("/d/job.sub", "executable = ../d/bin/../job.sh\n"),
                ("/d/sub/job.sub", "executable = ../job.sh\n"),
                ("/elsewhere/x.sub", "executable = /d/job.sh\n"),
            ],
            &[
                ("/A/job.sub", "executable = run.sh\n"),
                ("/B/job.sub", "executable = run.sh\n"),
                // Not transferred: the execute side's path, as written.
                ("/A/job.sub", "executable = run.sh\ntransfer_executable = false\n"),
                ("/B/job.sub", "executable = /opt/run.sh\ntransfer_executable = false\n"),
            ],
        );
    }

    #[test]
    fn input_files_are_the_files_they_name_from_initialdir() {
        check(
            &[
                ("/d/job.sub", "executable = /bin/x\ninput = in.txt\ntransfer_input_files = a.dat, data/\n"),
                (
                    "/d/job.sub",
                    "executable = /bin/x\ninput = /d/in.txt\ntransfer_input_files = /d/data/, ./a.dat, a.dat\n",
                ),
                (
                    "/d/job.sub",
                    "executable = /bin/x\ninitialdir = sub\ninput = ../in.txt\n\
                     transfer_input_files = ../data/,../a.dat\n",
                ),
                (
                    "/other/job.sub",
                    "executable = /bin/x\ninitialdir = /d\ninput = in.txt\ntransfer_input_files = data/,a.dat\n",
                ),
            ],
            &[
                ("/e/job.sub", "executable = /bin/x\ninput = in.txt\ntransfer_input_files = a.dat, data/\n"),
                ("/d/job.sub", "executable = /bin/x\ninput = in.txt\ntransfer_input_files = a.dat, data\n"),
                ("/d/job.sub", "executable = /bin/x\ninitialdir = sub\ninput = in.txt\n"),
                // A URL, and a name that starts with a macro, count as written.
                ("/d/job.sub", "executable = /bin/x\ntransfer_input_files = https://x.org/a.dat\n"),
                ("/e/job.sub", "executable = /bin/x\ntransfer_input_files = https://x.org/b.dat\n"),
                ("/d/job.sub", "executable = /bin/x\ntransfer_input_files = $(DATA)/a.dat\n"),
            ],
        );
        // A macro inside a name stays in it, resolved around it.
        check(
            &[
                ("/d/job.sub", "executable = /bin/x\ninput = in.$(CoschedJob)\n"),
                ("/d/job.sub", "executable = /bin/x\ninput = ./in.$(CoschedJob)\n"),
            ],
            &[("/e/job.sub", "executable = /bin/x\ninput = in.$(CoschedJob)\n")],
        );
    }

    #[test]
    fn requests_count_in_htcondors_units() {
        fn at(text: &str) -> (&'static str, &str) {
            ("/d/job.sub", text)
        }
        let text = |requests: &str| format!("executable = /bin/x\n{requests}\n");
        let (m256, m256_unit, m256_spaced, m256_g, m256_k) = (
            text("request_memory = 256"),
            text("request_memory = 256M"),
            text("request_memory = 256 MB"),
            text("request_memory = 0.25G"),
            text("request_memory = 262144k"),
        );
        let (m512, d256, expression) = (
            text("request_memory = 512"),
            text("request_disk = 256"),
            text("request_memory = ifThenElse(MemoryUsage > 256, 512, 256)"),
        );
        check(
            &[at(&m256), at(&m256_unit), at(&m256_spaced), at(&m256_g), at(&m256_k)],
            &[at(&m512), at(&d256), at(&expression)],
        );
        let (disk, disk_m, disk_g) =
            (text("request_disk = 1048576"), text("request_disk = 1024M"), text("request_disk = 1 GB"));
        check(&[at(&disk), at(&disk_m), at(&disk_g)], &[at(&text("request_disk = 1048577"))]);
    }

    #[test]
    fn arguments_are_their_words_in_either_syntax() {
        let at = |args: &'static str| ("/d/job.sub", args);
        check(
            &[
                at("executable = /bin/x\narguments = a b\n"),
                at("executable = /bin/x\narguments = \"a b\"\n"),
                at("executable = /bin/x\narguments = \"  a   'b' \"\n"),
                at("executable = /bin/x\narguments @=end\na\n  b\n@end\n"),
            ],
            &[
                at("executable = /bin/x\narguments = \"'a b'\"\n"),
                at("executable = /bin/x\narguments = a\n"),
                at("executable = /bin/x\narguments = b a\n"),
                at("executable = /bin/x\narguments = \"a\" b\n"),
            ],
        );
        // No arguments, however written, are none.
        check(
            &[
                at("executable = /bin/x\n"),
                at("executable = /bin/x\narguments =\n"),
                at("executable = /bin/x\narguments = \"\"\n"),
            ],
            &[],
        );
    }

    /// A program rebuilt in place is the same job: its knee carries over.
    #[test]
    fn a_programs_contents_are_not_its_kind() {
        let dir = tempfile::tempdir().unwrap();
        let (exe, sub) = (dir.path().join("run.sh"), dir.path().join("job.sub"));
        let path = sub.to_str().unwrap();
        std::fs::write(&exe, "#!/bin/sh\necho one\n").unwrap();
        let before = key_at(path, "executable = run.sh\n");
        std::fs::write(&exe, "#!/bin/sh\necho two, rebuilt\n").unwrap();
        assert_eq!(key_at(path, "executable = run.sh\n"), before);
        std::fs::remove_file(&exe).unwrap();
        assert_eq!(key_at(path, "executable = run.sh\n"), before, "nor whether it exists");
    }

    #[test]
    fn a_blind_runs_key_is_none_of_its_kinds_and_depends_on_their_order() {
        let (io, cpu) = (key("executable = io.sh\nqueue\n"), key("+CoschedKind = \"cpu\"\nqueue\n"));
        let both = blind_kind_key(&[io.clone(), cpu.clone()]);
        assert_eq!(both, format!("blind:{io}+{cpu}"));
        assert!(both != io && both != cpu && both != blind_kind_key(&[cpu, io]));
    }

    #[test]
    fn fnv1a_128_matches_its_published_vectors() {
        // The reference values of the FNV test suite (draft-eastlake-fnv).
        assert_eq!(fnv1a_128(b""), 0x6c62272e07bb014262b821756295c58d);
        assert_eq!(fnv1a_128(b"a"), 0xd228cb696f1a8caf78912b704e4a8964);
        assert_eq!(fnv1a_128(b"foobar"), 0x343e1662793c64bf6f0d3597ba446f18);
    }

    #[test]
    fn layout_order_outputs_and_per_job_values_do_not_change_the_kind() {
        let base =
            key("executable = sim.sh\narguments = -n 4 $(CoschedJob)\ntransfer_input_files = a.dat, b.dat\n\
             request_memory = 2 GB\noutput = out.$(CoschedJob)\nqueue\n");
        assert!(base.starts_with(FINGERPRINT) && base.len() == FINGERPRINT.len() + 32, "{base}");
        let same =
            key("# another layout\nRequest_Memory   =  2   GB\nerror = err.$(CoschedJob)\nlog = x.log\n\
             TRANSFER_INPUT_FILES = b.dat,a.dat,a.dat\nArguments = -n  4 \\\n  $(CoschedJob)\n\
             executable=sim.sh\noutput = elsewhere/o.$(CoschedJob)\n");
        assert_eq!(base, same);
        // A user macro counts by its value.
        let via_macro = key("prog = sim.sh\nexecutable = $(prog)\narguments = -n 4 $(CoschedJob)\n\
             transfer_input_files = a.dat, b.dat\nrequest_memory = 2 GB\n");
        assert_eq!(base, via_macro);
    }

    #[test]
    fn what_loads_a_site_differently_is_another_kind() {
        let text = "executable = sim.sh\narguments = -n 4\ntransfer_input_files = a.dat\nrequest_cpus = 1\n";
        let base = key(text);
        for (from, to) in [
            ("sim.sh", "other.sh"),
            ("-n 4", "-n 8"),
            ("a.dat", "big.dat"),
            ("request_cpus = 1", "request_cpus = 4"),
            ("request_cpus = 1", "request_cpus = 1\nrequest_disk = 10GB"),
        ] {
            assert_ne!(key(&text.replace(from, to)), base, "{from} → {to}");
        }
        // The last assignment is the one that counts.
        assert_eq!(key(&format!("executable = other.sh\n{text}")), base);
        assert_ne!(key(&format!("{text}executable = other.sh\n")), base);
    }

    #[test]
    fn a_named_kind_is_its_name_and_a_bad_name_is_an_error_at_its_line() {
        assert_eq!(key("executable = a.sh\n+CoschedKind = \"io-heavy\"\n"), "name:io-heavy");
        assert_eq!(key("executable = b.sh\nMY.CoschedKind = \"io-heavy\"\n"), "name:io-heavy");
        for bad in ["io-heavy", "\"two words\"", "\"\"", "\"a/b\""] {
            let desc = super::super::parse(
                Path::new("/d/job.sub"),
                &format!("executable = a.sh\n+CoschedKind = {bad}\n"),
            )
            .unwrap();
            let problems = kind_problems(&desc);
            assert_eq!(problems.len(), 1, "{bad}: {problems:?}");
            assert!(problems[0].is_error() && problems[0].location == Some((2, 1)), "{bad}: {problems:?}");
        }
    }
}
