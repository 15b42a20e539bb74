//! How `condor_submit` reads the values a kind is made of, so that two ways
//! of writing one job are one kind: `arguments` as words, `request_*`
//! quantities with their units, and paths on the submit host.
//!
//! - Arguments (HTCondor's `ArgList::AppendArgsV1WackedOrV2Quoted`,
//!   `condor_utils/condor_arglist.cpp`): a value that starts with `"` is
//!   the new syntax: up to the closing `"` (`""` is a literal `"`), words
//!   split at whitespace, `'…'` keeps whitespace in a word (`''` in it is a
//!   literal `'`). Anything else is the old syntax: words split at
//!   whitespace, `\"` a literal `"`, a bare `"` an error.
//! - Quantities (`parse_int64_bytes`, `condor_utils/metric_units.cpp`): a
//!   number (at most three decimals count), optional whitespace, an
//!   optional unit `K`, `M`, `G` or `T` (binary multiples, any case, an
//!   optional `B` after it); without a unit the command's own unit.
//!   The result is rounded up to whole units, as HTCondor rounds it.
//! - Paths: made absolute against a directory and normalised by their
//!   text alone (`.` and `..` resolved, no symbolic link followed, the file
//!   need not exist: a kind does not change with the file system).
//!
//! Each returns `None` where `condor_submit` would read the value another
//! way (an expression, a quote left open): the caller keeps such a value as
//! written.

use std::path::{Component, Path, PathBuf};

/// The words of an `arguments` value; `None` where `condor_submit` would
/// refuse it.
pub(super) fn argument_words(value: &str) -> Option<Vec<String>> {
    let trimmed = value.trim_start();
    match trimmed.strip_prefix('"') {
        Some(quoted) => split_v2(&unquote_v2(quoted)?),
        None => split_v1(value),
    }
}

/// The text between the new syntax's double quotes, `""` read as `"`;
/// `None` for an unclosed quote or text after the closing one.
fn unquote_v2(after_open: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = after_open.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '"' {
            out.push(c);
        } else if chars.peek() == Some(&'"') {
            chars.next();
            out.push('"');
        } else {
            return chars.all(char::is_whitespace).then_some(out);
        }
    }
    None
}

/// The new syntax's words: whitespace separates, `'…'` quotes (`''` inside
/// is a `'`); `None` for an unclosed `'`.
fn split_v2(raw: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' if chars.peek() == Some(&'\'') => {
                            chars.next();
                            word.push('\'');
                        }
                        '\'' => break,
                        other => word.push(other),
                    }
                }
            }
            c if is_arg_space(c) => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// The old syntax's words: whitespace separates, `\"` is a `"`; `None` for
/// a bare `"`.
fn split_v1(value: &str) -> Option<Vec<String>> {
    let mut raw = String::new();
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'"') => {
                chars.next();
                raw.push('"');
            }
            '"' => return None,
            c => raw.push(c),
        }
    }
    Some(raw.split(is_arg_space).filter(|w| !w.is_empty()).map(str::to_string).collect())
}

/// What separates arguments (HTCondor's list: no other whitespace).
fn is_arg_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// A `request_*` quantity in units of `base` bytes (1024 × 1024 for
/// `request_memory`'s MiB, 1024 for `request_disk`'s KiB); `None` for what
/// is not a plain quantity (an expression).
pub(super) fn quantity(value: &str, base: u64) -> Option<u64> {
    let s = value.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let whole: u64 = if digits == 0 { 0 } else { s[..digits].parse().ok()? };
    let mut rest = &s[digits..];
    let mut fraction = 0.0;
    if let Some(after) = rest.strip_prefix('.') {
        let decimals = after.find(|c: char| !c.is_ascii_digit()).unwrap_or(after.len());
        for (i, d) in after[..decimals].bytes().take(3).enumerate() {
            fraction += f64::from(d - b'0') / 10f64.powi(i as i32 + 1);
        }
        rest = &after[decimals..];
    }
    if rest.len() == s.len() {
        return None; // no number at all
    }
    let rest = rest.trim_start();
    let mut unit = rest.chars();
    let multiplier: u64 = match unit.next().map(|c| c.to_ascii_lowercase()) {
        None => base,
        Some('k') => 1 << 10,
        Some('m') => 1 << 20,
        Some('g') => 1 << 30,
        Some('t') => 1 << 40,
        Some(_) => return None,
    };
    let after_unit = unit.as_str();
    let after_unit = after_unit.strip_prefix(['b', 'B']).unwrap_or(after_unit);
    if !after_unit.trim().is_empty() {
        return None;
    }
    // As HTCondor computes it: rounded up to whole units of `base`.
    let bytes = (whole as f64 + fraction) * multiplier as f64 + (base - 1) as f64;
    Some(bytes as u64 / base)
}

/// `name` on the submit host, absolute against `dir` and normalised by its
/// text; a trailing `/` (a directory's contents, to `transfer_input_files`)
/// is kept.
pub(super) fn absolute_path(dir: &Path, name: &str) -> String {
    let mut out = PathBuf::new();
    for part in dir.join(name).components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                // `/..` is `/`.
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                }
            }
            other => out.push(other),
        }
    }
    let mut text = out.to_string_lossy().into_owned();
    if name.ends_with('/') && !text.ends_with('/') {
        text.push('/');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(value: &str) -> Option<Vec<String>> {
        argument_words(value)
    }

    fn some(words: &[&str]) -> Option<Vec<String>> {
        Some(words.iter().map(|w| w.to_string()).collect())
    }

    #[test]
    fn both_argument_syntaxes_give_the_words_condor_submit_passes() {
        assert_eq!(words("a b"), some(&["a", "b"]));
        assert_eq!(words("\"a b\""), some(&["a", "b"]));
        assert_eq!(words("  \"  a   b \"  "), some(&["a", "b"]));
        assert_eq!(words("\"'one word' two\""), some(&["one word", "two"]));
        assert_eq!(words("\"it''s 'it''s'\""), some(&["its", "it's"]));
        assert_eq!(words("\"say \"\"hi\"\"\""), some(&["say", "\"hi\""]));
        assert_eq!(words("\"''\""), some(&[""]), "an empty word, as '' makes one");
        assert_eq!(words("say \\\"hi\\\""), some(&["say", "\"hi\""]));
        assert_eq!(words("'one word'"), some(&["'one", "word'"]), "no quoting in the old syntax");
        assert_eq!(words("-n 4 $(CoschedJob)"), some(&["-n", "4", "$(CoschedJob)"]));
        assert_eq!(words(""), some(&[]));
        assert_eq!(words("\"\""), some(&[]));
        for refused in ["\"open", "\"a\" b", "\"'open\"", "a \"b\""] {
            assert_eq!(words(refused), None, "{refused}");
        }
    }

    #[test]
    fn quantities_are_read_in_the_commands_unit_and_rounded_up() {
        const MIB: u64 = 1 << 20;
        for (value, mib) in [
            ("256", 256),
            ("256M", 256),
            ("256 MB", 256),
            ("256mb", 256),
            ("0.25G", 256),
            ("0.25 gb", 256),
            ("262144K", 256),
            ("2 GB", 2048),
            ("1T", 1 << 20),
            ("1.5", 2),
            ("1K", 1),
            (".5G", 512),
            ("1.001G", 1026),
            ("2.2509G", 2304),
        ] {
            assert_eq!(quantity(value, MIB), Some(mib), "{value}");
        }
        assert_eq!(quantity("2", 1024), Some(2), "request_disk's KiB");
        assert_eq!(quantity("2M", 1024), Some(2048));
        for expression in ["MemoryUsage * 2", "256 MiB", "1000000 B", "M", "", "2 G B", "-", "1e3"] {
            assert_eq!(quantity(expression, MIB), None, "{expression}");
        }
    }

    #[test]
    fn paths_are_made_absolute_and_normalised_by_their_text() {
        let dir = Path::new("/jobs/a");
        for (name, path) in [
            ("job.sh", "/jobs/a/job.sh"),
            ("./job.sh", "/jobs/a/job.sh"),
            ("/jobs/a/job.sh", "/jobs/a/job.sh"),
            ("../a/./job.sh", "/jobs/a/job.sh"),
            ("bin//job.sh", "/jobs/a/bin/job.sh"),
            ("/../../x", "/x"),
            ("data/", "/jobs/a/data/"),
            ("in.$(CoschedJob)", "/jobs/a/in.$(CoschedJob)"),
        ] {
            assert_eq!(absolute_path(dir, name), path, "{name}");
        }
    }
}
