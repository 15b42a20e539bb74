//! Which kind of job a submit description is, across runs: the key its
//! memory is kept under (`policy::memory`), so that the same job run again
//! from another directory starts from what the last run learned, and a
//! different job at the same site does not inherit its knee.
//!
//! - A user may name the kind: `+CoschedKind = "name"` (or
//!   `MY.CoschedKind`), a job attribute like any other (it reaches the job
//!   ads, so `condor_q -af CoschedKind` shows it). Descriptions with the
//!   same name share memory whatever else they say: a name is for a job
//!   whose arguments change from run to run but whose load does not. The
//!   key is `name:NAME`.
//! - Otherwise the kind is the fingerprint of what makes a job load a site
//!   the way it does: `executable`, `arguments`, `transfer_input_files` and
//!   every `request_*` command, as their last assignment says (user macros
//!   expanded; `$(CoschedJob)`, `$(Process)` and the other per-job macros
//!   left as written, so every job of a run and every run have the same
//!   text). Each value's whitespace runs count as one space, the input
//!   files are a set (order and repeats do not count), the commands are
//!   taken in name order whatever their order in the file, and nothing
//!   else counts (`output`, `error`, `log`, comments, the description's
//!   own path). The key is `fp1:` and the FNV-1a 128-bit hash of that
//!   canonical text in hex (`1` is the canonical form's version: a new form
//!   is a new prefix, never the same key with another meaning).
//!
//! - A run told its jobs are of one kind (`cosched submit --blind-types`)
//!   learns about its mix as a whole: its key is `blind:` and its kinds'
//!   keys in kind order, joined by `+`, never one of its kinds' own.
//!
//! A relative `executable` is compared as written: `job.sh` next to two
//! copies of the same description is the same kind.

use super::macros::expand_user_macros;
use super::{Command, SubmitDescription};
use crate::config::Problem;
use std::collections::BTreeMap;

/// The job attribute that names a kind (normalized: `+X` is `my.x`).
pub(super) const KIND_ATTR: &str = "my.coschedkind";

/// Longest kind name.
const MAX_NAME: usize = 64;

/// The memory key of `desc`'s kind (see the module doc).
pub fn kind_key(desc: &SubmitDescription) -> String {
    match user_kind(desc) {
        Some(Ok(name)) => format!("name:{name}"),
        // An invalid name is an error `check` reports before any run.
        Some(Err(_)) | None => format!("fp1:{:032x}", fnv1a_128(canonical(desc).as_bytes())),
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

/// One `key=value` line per command that makes the kind, in key order.
fn canonical(desc: &SubmitDescription) -> String {
    let counts = |key: &str| {
        matches!(key, "executable" | "arguments" | "transfer_input_files") || key.starts_with("request_")
    };
    // The last assignment of a key is the one HTCondor uses.
    let mut chosen: BTreeMap<String, &str> = BTreeMap::new();
    for c in &desc.commands {
        let key = c.normalized_key();
        if counts(&key) {
            chosen.insert(key, &c.value);
        }
    }
    let mut text = String::new();
    for (key, value) in chosen {
        let value = expand_user_macros(desc, value);
        let value = if key == "transfer_input_files" {
            let mut files: Vec<&str> = value.split(',').map(str::trim).filter(|f| !f.is_empty()).collect();
            files.sort_unstable();
            files.dedup();
            files.join(",")
        } else {
            value.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        text.push_str(&key);
        text.push('=');
        text.push_str(&value);
        text.push('\n');
    }
    text
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
        kind_key(&super::super::parse(Path::new("/d/job.sub"), text).expect("parses"))
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
        assert!(base.starts_with("fp1:") && base.len() == 4 + 32, "{base}");
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
