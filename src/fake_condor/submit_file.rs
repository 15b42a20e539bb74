//! The subset of HTCondor's submit-description language the fake accepts:
//! what cosched writes and what users usually write.
//!
//! Supported: `#` comment lines, `\` line continuations, `key = value`
//! (keys case-insensitive), `+Attr = value` and `MY.Attr = value`, macros
//! `$(Cluster)` `$(ClusterId)` `$(Process)` `$(ProcId)` `$(Item)`
//! `$(ItemIndex)` `$(Row)` `$(Step)` `$(NAME)` `$(NAME:default)` `$ENV(NAME)`,
//! and the queue forms `queue`, `queue N`,
//! `queue [N] VARS from ( rows… )` (one row per line, the closing `)` on its
//! own line or at the end of the last row; a one-line list of one variable
//! holds one item per word), `queue [N] VARS from FILE` and
//! `queue [N] VAR in ( a, b c )`. Several queue statements make one cluster.
//! Errors carry the line number, like condor_submit's.

use std::collections::BTreeMap;
use std::path::Path;

/// One statement of a submit description.
#[derive(Clone, Debug, PartialEq)]
enum Statement {
    /// `key = value`; key lower-cased.
    Set {
        key: String,
        value: String,
    },
    /// `+Attr = value` / `MY.Attr = value`; name as written.
    Attr {
        name: String,
        value: String,
    },
    Queue {
        count: u64,
        vars: Vec<String>,
        rows: Vec<Vec<String>>,
    },
}

/// A parsed submit description, before macros are expanded.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Template {
    statements: Vec<Statement>,
}

/// One proc of a cluster: its submit variables, expanded on demand.
#[derive(Clone, Debug)]
pub(crate) struct Proc {
    pub proc: u64,
    /// Variables from `key = value` lines in force at its queue statement.
    vars: BTreeMap<String, String>,
    /// Per-proc variables: queue variables, Cluster, Process, Item…
    live: BTreeMap<String, String>,
    attrs: Vec<(String, String)>,
}

/// Parses `text`; `base_dir` is where `queue … from FILE` looks for FILE.
pub(crate) fn parse(text: &str, base_dir: &Path) -> Result<Template, String> {
    let raw: Vec<&str> = text.lines().collect();
    let mut statements = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        let first_line = i + 1;
        let mut line = raw[i].trim_end_matches('\r').to_string();
        i += 1;
        while line.trim_end().ends_with('\\') && i <= raw.len() {
            let trimmed = line.trim_end();
            line = trimmed[..trimmed.len() - 1].to_string();
            if i < raw.len() {
                line.push_str(raw[i].trim_end_matches('\r').trim_start());
            }
            i += 1;
        }
        let stmt = line.trim();
        if stmt.is_empty() || stmt.starts_with('#') {
            continue;
        }
        let err = |msg: String| format!("on Line {first_line} of submit file: {msg}");
        if let Some(rest) = queue_keyword(stmt) {
            let q = parse_queue(rest, &raw, &mut i, base_dir).map_err(err)?;
            statements.push(q);
            continue;
        }
        let Some((key, value)) = stmt.split_once('=') else {
            return Err(err(format!("Submit file line has no '=' and is not a queue statement: {stmt}")));
        };
        let key = key.trim();
        let value = value.trim().to_string();
        if key.is_empty() {
            return Err(err(format!("no name before '=': {stmt}")));
        }
        if let Some(name) = key.strip_prefix('+').or_else(|| strip_prefix_ci(key, "MY.")) {
            if !valid_attr_name(name) {
                return Err(err(format!("invalid attribute name {name:?}")));
            }
            statements.push(Statement::Attr { name: name.to_string(), value });
        } else {
            if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
                return Err(err(format!("invalid submit key {key:?}")));
            }
            statements.push(Statement::Set { key: key.to_ascii_lowercase(), value });
        }
    }
    if !statements.iter().any(|s| matches!(s, Statement::Queue { .. })) {
        return Err("no queue statement in the submit file".into());
    }
    Ok(Template { statements })
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)).then(|| &s[prefix.len()..])
}

fn valid_attr_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The text after `queue`, when `stmt` is a queue statement.
fn queue_keyword(stmt: &str) -> Option<&str> {
    let rest = strip_prefix_ci(stmt, "queue")?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim())
}

fn split_items(s: &str) -> Vec<String> {
    s.split(|c: char| c == ',' || c.is_whitespace()).filter(|p| !p.is_empty()).map(str::to_string).collect()
}

/// Splits a `from` row into `n` values: by commas/whitespace, the last value
/// taking the rest of the row.
fn split_row(row: &str, n: usize) -> Vec<String> {
    let mut values = Vec::with_capacity(n);
    let mut rest = row.trim();
    while values.len() + 1 < n && !rest.is_empty() {
        let end = rest.find(|c: char| c == ',' || c.is_whitespace()).unwrap_or(rest.len());
        values.push(rest[..end].to_string());
        rest = rest[end..].trim_start_matches(|c: char| c == ',' || c.is_whitespace());
    }
    values.push(rest.to_string());
    values.resize(n, String::new());
    values
}

fn parse_queue(rest: &str, raw: &[&str], next: &mut usize, base_dir: &Path) -> Result<Statement, String> {
    let mut rest = rest.trim();
    let mut count = 1;
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    if digits > 0 {
        count = rest[..digits].parse::<u64>().map_err(|e| format!("bad queue count: {e}"))?;
        rest = rest[digits..].trim_start();
    }
    if rest.is_empty() {
        return Ok(Statement::Queue { count, vars: Vec::new(), rows: Vec::new() });
    }
    let lower = rest.to_ascii_lowercase();
    let keyword = [" from", " in", " matching"]
        .iter()
        .filter_map(|k| {
            let padded = format!(" {lower}");
            padded.find(&format!("{k} ")).or_else(|| padded.find(&format!("{k}("))).map(|at| (at, k.trim()))
        })
        .min_by_key(|(at, _)| *at);
    let Some((at, keyword)) = keyword else {
        return Err(format!("unsupported queue statement: queue {rest}"));
    };
    // `at` indexes " " + rest: the keyword starts at rest[at], the variables end before it.
    let vars: Vec<String> = split_items(&rest[..at.saturating_sub(1)]);
    let vars = if vars.is_empty() { vec!["Item".to_string()] } else { vars };
    if let Some(bad) = vars.iter().find(|v| !valid_attr_name(v)) {
        return Err(format!("invalid queue variable name {bad:?}"));
    }
    let after = rest[at + keyword.len()..].trim();
    if keyword == "matching" {
        return Err("queue … matching is not supported by the fake HTCondor".into());
    }
    let lines: Vec<String> = if let Some(inline) = after.strip_prefix('(') {
        match inline.find(')') {
            Some(close) => vec![inline[..close].to_string()],
            None => {
                let mut lines = vec![inline.to_string()];
                loop {
                    let Some(line) = raw.get(*next) else {
                        return Err("the item list has no closing ')'".into());
                    };
                    *next += 1;
                    if let Some(close) = line.find(')') {
                        lines.push(line[..close].to_string());
                        break;
                    }
                    lines.push(line.to_string());
                }
                lines
            }
        }
    } else if !after.is_empty() {
        let path = base_dir.join(after);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("Can't open item file {}: {}", path.display(), super::os_text(&e)))?;
        text.lines().map(str::to_string).collect()
    } else {
        return Err(format!("queue … {keyword} needs a list in ( ) or a file"));
    };
    let one_line_list = lines.len() == 1 && after.starts_with('(');
    let rows: Vec<Vec<String>> = if keyword == "in" || (one_line_list && vars.len() == 1) {
        if vars.len() != 1 {
            return Err("queue … in takes one variable".into());
        }
        lines.iter().flat_map(|l| split_items(l)).map(|item| vec![item]).collect()
    } else {
        lines
            .iter()
            .map(|l| l.trim_end_matches('\r').trim())
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| split_row(l, vars.len()))
            .collect()
    };
    Ok(Statement::Queue { count, vars, rows })
}

impl Template {
    /// The procs of cluster `cluster`, numbered from 0 in queue order.
    pub fn procs(&self, cluster: u64) -> Vec<Proc> {
        let mut vars: BTreeMap<String, String> = BTreeMap::new();
        let mut attrs: Vec<(String, String)> = Vec::new();
        let mut procs = Vec::new();
        for stmt in &self.statements {
            match stmt {
                Statement::Set { key, value } => {
                    vars.insert(key.clone(), value.clone());
                }
                Statement::Attr { name, value } => {
                    attrs.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
                    attrs.push((name.clone(), value.clone()));
                }
                Statement::Queue { count, vars: names, rows } => {
                    let no_items = [Vec::new()];
                    let rows: &[Vec<String>] = if names.is_empty() { &no_items } else { rows };
                    for (row_index, row) in rows.iter().enumerate() {
                        for step in 0..*count {
                            let proc = procs.len() as u64;
                            let mut live = BTreeMap::new();
                            for (name, value) in names.iter().zip(row) {
                                live.insert(name.to_ascii_lowercase(), value.clone());
                            }
                            for (k, v) in [
                                ("cluster", cluster.to_string()),
                                ("clusterid", cluster.to_string()),
                                ("process", proc.to_string()),
                                ("procid", proc.to_string()),
                                ("step", step.to_string()),
                                ("itemindex", row_index.to_string()),
                                ("row", row_index.to_string()),
                            ] {
                                live.insert(k.to_string(), v);
                            }
                            live.entry("item".to_string()).or_default();
                            procs.push(Proc { proc, vars: vars.clone(), live, attrs: attrs.clone() });
                        }
                    }
                }
            }
        }
        procs
    }
}

impl Proc {
    /// The expanded value of submit key `key` (case-insensitive).
    pub fn get(&self, key: &str) -> Option<String> {
        let raw = self.vars.get(&key.to_ascii_lowercase())?;
        Some(self.expand(raw, 0))
    }

    /// `+Attr` attributes, values expanded, names as written.
    pub fn attrs(&self) -> Vec<(String, String)> {
        self.attrs.iter().map(|(n, v)| (n.clone(), self.expand(v, 0))).collect()
    }

    fn lookup(&self, name: &str, depth: u32) -> Option<String> {
        let lower = name.to_ascii_lowercase();
        if let Some(v) = self.live.get(&lower) {
            return Some(v.clone());
        }
        self.vars.get(&lower).map(|raw| self.expand(raw, depth + 1))
    }

    fn expand(&self, text: &str, depth: u32) -> String {
        if depth > 32 || !text.contains('$') {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            let tail = &rest[at..];
            if tail.starts_with("$$(") {
                // Match-time macro: left for the matchmaker, kept as written.
                let end = tail.find(')').map_or(tail.len(), |e| e + 1);
                out.push_str(&tail[..end]);
                rest = &tail[end..];
            } else if let Some(inner) = tail.strip_prefix("$(") {
                let Some(close) = inner.find(')') else {
                    out.push_str(tail);
                    rest = "";
                    continue;
                };
                let body = &inner[..close];
                let (name, default) = match body.split_once(':') {
                    Some((n, d)) => (n, Some(d)),
                    None => (body, None),
                };
                let value =
                    self.lookup(name.trim(), depth).or_else(|| default.map(|d| self.expand(d, depth + 1)));
                out.push_str(&value.unwrap_or_default());
                rest = &inner[close + 1..];
            } else if let Some(inner) = strip_prefix_ci(tail, "$ENV(") {
                let close = inner.find(')').unwrap_or(inner.len());
                out.push_str(&std::env::var(inner[..close].trim()).unwrap_or_default());
                rest = inner.get(close + 1..).unwrap_or("");
            } else {
                out.push('$');
                rest = &tail[1..];
            }
        }
        out.push_str(rest);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn procs(text: &str) -> Vec<Proc> {
        parse(text, Path::new("/nonexistent")).expect("parses").procs(42)
    }

    #[test]
    fn plain_queue_counts_and_macros() {
        let p = procs("executable = /bin/sleep\narguments = $(Cluster).$(Process)\nqueue 3\n");
        assert_eq!(p.len(), 3);
        assert_eq!(p[2].get("Arguments").as_deref(), Some("42.2"));
        assert_eq!(p[0].get("EXECUTABLE").as_deref(), Some("/bin/sleep"));
        assert_eq!(procs("queue").len(), 1);
    }

    #[test]
    fn queue_from_inline_list_with_attrs_and_continuations() {
        let text = "# cosched batch\nuniverse = grid\ngrid_resource = condor ce1 \\\n  ce1:9619\n\
                    +CoschedRun = \"r1\"\n+CoschedJob = $(CoschedJob)\nlog = /l/$(ClusterId).log\n\
                    queue CoschedJob from (\n  7\n  11\n\n  3\n)\n";
        let p = procs(text);
        assert_eq!(p.len(), 3);
        assert_eq!(p[1].get("grid_resource").as_deref(), Some("condor ce1 ce1:9619"));
        assert_eq!(
            p[1].attrs(),
            vec![("CoschedRun".into(), "\"r1\"".into()), ("CoschedJob".into(), "11".into())]
        );
        assert_eq!(p[2].get("log").as_deref(), Some("/l/42.log"));
    }

    #[test]
    fn queue_rows_with_several_variables_and_in_lists() {
        let p = procs("arguments = $(a)-$(b)\nqueue a, b from (\n1 x y\n2,z\n)\n");
        assert_eq!(p.iter().map(|p| p.get("arguments").unwrap()).collect::<Vec<_>>(), ["1-x y", "2-z"]);
        let p = procs("arguments = $(Item)/$(Step)\nqueue 2 in (a, b c)\n");
        assert_eq!(
            p.iter().map(|p| p.get("arguments").unwrap()).collect::<Vec<_>>(),
            ["a/0", "a/1", "b/0", "b/1", "c/0", "c/1"]
        );
        let p = procs("x = $(Undefined:dflt)$(nope)\nqueue S from (5 7)\n");
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].get("x").as_deref(), Some("dflt"));
    }

    #[test]
    fn several_queue_statements_make_one_cluster() {
        let p = procs("arguments = a\nqueue 2\narguments = b\nqueue\n");
        assert_eq!(
            p.iter().map(|p| (p.proc, p.get("arguments").unwrap())).collect::<Vec<_>>(),
            [(0, "a".to_string()), (1, "a".to_string()), (2, "b".to_string())]
        );
    }

    #[test]
    fn errors_name_the_line() {
        let base = Path::new("/nonexistent");
        let e = parse("executable = x\nthis is wrong\nqueue\n", base).unwrap_err();
        assert!(e.starts_with("on Line 2 of submit file"), "{e}");
        assert!(parse("executable = x\n", base).unwrap_err().contains("no queue"));
        assert!(parse("queue X from (\n1\n", base).unwrap_err().contains("closing"));
        assert!(parse("queue X from items.txt\n", base).unwrap_err().contains("items.txt"));
        assert!(parse("+1bad = 3\nqueue\n", base).is_err());
    }
}
