//! ClassAd values and the constraint subset the fake understands.
//!
//! Values come from `+Attr = value` lines of submit descriptions; constraints
//! come from `condor_q -constraint` and `condor_rm -constraint`. Supported:
//! literals (strings, integers, reals, `true`/`false`/`undefined`), attribute
//! references, `== != =?= =!= < <= > >=`, `&& || !` and parentheses, with
//! ClassAd semantics where they matter for cosched: `==` on strings ignores
//! case, comparisons with an undefined attribute are undefined, and only a
//! result of `true` matches.

use serde::{Deserialize, Serialize};

/// An attribute value of a job ad.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum AdValue {
    Bool(bool),
    Int(i64),
    Real(f64),
    Str(String),
    /// Anything that is not a literal, kept as written.
    Expr {
        expr: String,
    },
}

impl AdValue {
    /// The value of a `+Attr = text` line: a literal when it is one.
    pub fn parse_literal(text: &str) -> AdValue {
        let text = text.trim();
        if let Ok(tokens) = tokenize(text) {
            if let [token] = tokens.as_slice() {
                match token {
                    Token::Str(s) => return AdValue::Str(s.clone()),
                    Token::Int(i) => return AdValue::Int(*i),
                    Token::Real(r) => return AdValue::Real(*r),
                    Token::Ident(w) if w.eq_ignore_ascii_case("true") => return AdValue::Bool(true),
                    Token::Ident(w) if w.eq_ignore_ascii_case("false") => return AdValue::Bool(false),
                    _ => {}
                }
            }
            if let [Token::Op("-"), Token::Int(i)] = tokens.as_slice() {
                return AdValue::Int(-i);
            }
            if let [Token::Op("-"), Token::Real(r)] = tokens.as_slice() {
                return AdValue::Real(-r);
            }
        }
        AdValue::Expr { expr: text.to_string() }
    }

    /// A non-negative integer, also from a numeric string.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            AdValue::Int(i) => u64::try_from(*i).ok(),
            AdValue::Str(s) => s.trim().parse().ok(),
            AdValue::Real(r) if *r >= 0.0 && r.fract() == 0.0 => Some(*r as u64),
            _ => None,
        }
    }

    /// The value as plain text (a string without quotes).
    pub fn as_plain_string(&self) -> String {
        match self {
            AdValue::Bool(b) => b.to_string(),
            AdValue::Int(i) => i.to_string(),
            AdValue::Real(r) => r.to_string(),
            AdValue::Str(s) => s.clone(),
            AdValue::Expr { expr } => expr.clone(),
        }
    }

    /// The value as `condor_q -json` prints it.
    pub fn to_json_text(&self) -> String {
        match self {
            AdValue::Bool(b) => b.to_string(),
            AdValue::Int(i) => i.to_string(),
            AdValue::Real(r) => serde_json::to_string(r).unwrap_or_else(|_| "null".into()),
            AdValue::Str(s) => json_string(s),
            AdValue::Expr { expr } => {
                let quoted = json_string(expr);
                format!("\"\\/Expr({})\\/\"", &quoted[1..quoted.len() - 1])
            }
        }
    }
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Str(String),
    Int(i64),
    Real(f64),
    Ident(String),
    Op(&'static str),
}

const OPERATORS: [&str; 14] =
    ["=?=", "=!=", "==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")", "-"];

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    'outer: while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'"' {
            let mut s = String::new();
            let mut chars = text[i + 1..].char_indices();
            while let Some((j, ch)) = chars.next() {
                match ch {
                    '"' => {
                        tokens.push(Token::Str(s));
                        i += 1 + j + 1;
                        continue 'outer;
                    }
                    '\\' => match chars.next() {
                        Some((_, 'n')) => s.push('\n'),
                        Some((_, 't')) => s.push('\t'),
                        Some((_, other)) => s.push(other),
                        None => break,
                    },
                    _ => s.push(ch),
                }
            }
            return Err(format!("unterminated string in {text:?}"));
        }
        if c.is_ascii_digit() || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                // Exponents: 1e-3.
                if (bytes[i] == b'e' || bytes[i] == b'E') && matches!(bytes.get(i + 1), Some(b'-' | b'+')) {
                    i += 1;
                }
                i += 1;
            }
            let word = &text[start..i];
            if let Ok(n) = word.parse::<i64>() {
                tokens.push(Token::Int(n));
            } else if let Ok(r) = word.parse::<f64>() {
                tokens.push(Token::Real(r));
            } else {
                return Err(format!("bad number {word:?}"));
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'.')
            {
                i += 1;
            }
            tokens.push(Token::Ident(text[start..i].to_string()));
            continue;
        }
        for op in OPERATORS {
            if text[i..].starts_with(op) {
                tokens.push(Token::Op(op));
                i += op.len();
                continue 'outer;
            }
        }
        return Err(format!("unexpected {:?} in {text:?}", &text[i..]));
    }
    Ok(tokens)
}

/// A parsed constraint.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Expr {
    Literal(Val),
    Attr(String),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(&'static str, Box<Expr>, Box<Expr>),
}

/// A value during evaluation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Val {
    Undefined,
    Error,
    Bool(bool),
    Int(i64),
    Real(f64),
    Str(String),
}

impl From<&AdValue> for Val {
    fn from(v: &AdValue) -> Val {
        match v {
            AdValue::Bool(b) => Val::Bool(*b),
            AdValue::Int(i) => Val::Int(*i),
            AdValue::Real(r) => Val::Real(*r),
            AdValue::Str(s) => Val::Str(s.clone()),
            AdValue::Expr { .. } => Val::Undefined,
        }
    }
}

impl Expr {
    /// Parses a constraint; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Expr, String> {
        let tokens = tokenize(text)?;
        let mut p = ExprParser { tokens: &tokens, pos: 0 };
        let e = p.or()?;
        if p.pos != tokens.len() {
            return Err(format!("unexpected {:?} in {text:?}", tokens[p.pos]));
        }
        Ok(e)
    }

    /// True when the expression evaluates to `true` for the ad `lookup` reads.
    pub fn matches(&self, lookup: &dyn Fn(&str) -> Option<AdValue>) -> bool {
        self.eval(lookup) == Val::Bool(true)
    }

    fn eval(&self, lookup: &dyn Fn(&str) -> Option<AdValue>) -> Val {
        match self {
            Expr::Literal(v) => v.clone(),
            Expr::Attr(name) => lookup(name).as_ref().map_or(Val::Undefined, Val::from),
            Expr::Not(e) => match e.eval(lookup) {
                Val::Bool(b) => Val::Bool(!b),
                Val::Undefined => Val::Undefined,
                _ => Val::Error,
            },
            Expr::Neg(e) => match e.eval(lookup) {
                Val::Int(i) => Val::Int(-i),
                Val::Real(r) => Val::Real(-r),
                Val::Undefined => Val::Undefined,
                _ => Val::Error,
            },
            Expr::And(a, b) => match (a.eval(lookup), b.eval(lookup)) {
                (Val::Bool(false), _) | (_, Val::Bool(false)) => Val::Bool(false),
                (Val::Bool(true), Val::Bool(true)) => Val::Bool(true),
                (Val::Error, _) | (_, Val::Error) => Val::Error,
                _ => Val::Undefined,
            },
            Expr::Or(a, b) => match (a.eval(lookup), b.eval(lookup)) {
                (Val::Bool(true), _) | (_, Val::Bool(true)) => Val::Bool(true),
                (Val::Bool(false), Val::Bool(false)) => Val::Bool(false),
                (Val::Error, _) | (_, Val::Error) => Val::Error,
                _ => Val::Undefined,
            },
            Expr::Cmp(op, a, b) => compare(op, &a.eval(lookup), &b.eval(lookup)),
        }
    }
}

fn compare(op: &str, a: &Val, b: &Val) -> Val {
    use std::cmp::Ordering;
    if op == "=?=" || op == "=!=" {
        let same = match (a, b) {
            (Val::Str(x), Val::Str(y)) => x == y,
            (Val::Int(x), Val::Int(y)) => x == y,
            (Val::Real(x), Val::Real(y)) => x == y,
            (Val::Bool(x), Val::Bool(y)) => x == y,
            (Val::Undefined, Val::Undefined) | (Val::Error, Val::Error) => true,
            _ => false,
        };
        return Val::Bool(same == (op == "=?="));
    }
    let ordering = match (a, b) {
        (Val::Undefined, _) | (_, Val::Undefined) => return Val::Undefined,
        (Val::Str(x), Val::Str(y)) => x.to_lowercase().cmp(&y.to_lowercase()),
        (Val::Bool(x), Val::Bool(y)) if op == "==" || op == "!=" => x.cmp(y),
        (x, y) => match (number(x), number(y)) {
            (Some(x), Some(y)) => match x.partial_cmp(&y) {
                Some(o) => o,
                None => return Val::Error,
            },
            _ => return Val::Error,
        },
    };
    Val::Bool(match op {
        "==" => ordering == Ordering::Equal,
        "!=" => ordering != Ordering::Equal,
        "<" => ordering == Ordering::Less,
        "<=" => ordering != Ordering::Greater,
        ">" => ordering == Ordering::Greater,
        _ => ordering != Ordering::Less,
    })
}

fn number(v: &Val) -> Option<f64> {
    match v {
        Val::Int(i) => Some(*i as f64),
        Val::Real(r) => Some(*r),
        _ => None,
    }
}

struct ExprParser<'a> {
    tokens: &'a [Token],
    pos: usize,
}

impl ExprParser<'_> {
    fn peek_op(&self) -> Option<&'static str> {
        match self.tokens.get(self.pos) {
            Some(Token::Op(op)) => Some(op),
            _ => None,
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut e = self.and()?;
        while self.peek_op() == Some("||") {
            self.pos += 1;
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut e = self.cmp()?;
        while self.peek_op() == Some("&&") {
            self.pos += 1;
            e = Expr::And(Box::new(e), Box::new(self.cmp()?));
        }
        Ok(e)
    }

    fn cmp(&mut self) -> Result<Expr, String> {
        let e = self.unary()?;
        match self.peek_op() {
            Some(op @ ("==" | "!=" | "=?=" | "=!=" | "<" | "<=" | ">" | ">=")) => {
                self.pos += 1;
                Ok(Expr::Cmp(op, Box::new(e), Box::new(self.unary()?)))
            }
            _ => Ok(e),
        }
    }

    fn unary(&mut self) -> Result<Expr, String> {
        match self.peek_op() {
            Some("!") => {
                self.pos += 1;
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            Some("-") => {
                self.pos += 1;
                Ok(Expr::Neg(Box::new(self.unary()?)))
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let Some(token) = self.tokens.get(self.pos) else {
            return Err("the expression ends too early".into());
        };
        self.pos += 1;
        Ok(match token {
            Token::Op("(") => {
                let e = self.or()?;
                if self.peek_op() != Some(")") {
                    return Err("missing ')'".into());
                }
                self.pos += 1;
                e
            }
            Token::Op(op) => return Err(format!("unexpected {op:?}")),
            Token::Str(s) => Expr::Literal(Val::Str(s.clone())),
            Token::Int(i) => Expr::Literal(Val::Int(*i)),
            Token::Real(r) => Expr::Literal(Val::Real(*r)),
            Token::Ident(w) if w.eq_ignore_ascii_case("true") => Expr::Literal(Val::Bool(true)),
            Token::Ident(w) if w.eq_ignore_ascii_case("false") => Expr::Literal(Val::Bool(false)),
            Token::Ident(w) if w.eq_ignore_ascii_case("undefined") => Expr::Literal(Val::Undefined),
            Token::Ident(w) => {
                let name = w.strip_prefix("MY.").or_else(|| w.strip_prefix("my.")).unwrap_or(w);
                Expr::Attr(name.to_string())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ad(name: &str) -> Option<AdValue> {
        match name.to_ascii_lowercase().as_str() {
            "clusterid" => Some(AdValue::Int(55)),
            "procid" => Some(AdValue::Int(1)),
            "coschedrun" => Some(AdValue::Str("Run-7".into())),
            _ => None,
        }
    }

    fn check(text: &str, expected: bool) {
        let e = Expr::parse(text).unwrap_or_else(|err| panic!("{text}: {err}"));
        assert_eq!(e.matches(&ad), expected, "{text}");
    }

    #[test]
    fn constraints_cosched_uses() {
        check(r#"CoschedRun == "run-7""#, true);
        check(r#"CoschedRun =?= "run-7""#, false);
        check(r#"CoschedRun == "Run-7" && ClusterId == 55"#, true);
        check(r#"CoschedRun == "Run-7" && ProcId == 0"#, false);
        check("(ClusterId == 55 || ClusterId == 99999)", true);
        check("ClusterId == 54 && ProcId == 1 || ClusterId == 55 && ProcId == 1", true);
        check("Missing == 3", false);
        check("!(Missing == 3)", false);
        check("Missing =?= undefined", true);
        check("ClusterId >= 55 && ClusterId < 56.5", true);
        check("ClusterId != -55", true);
    }

    #[test]
    fn bad_constraints_are_errors_not_panics() {
        for text in ["", "ClusterId ==", "(ClusterId == 1", "\"open", "a == 1 )", "1.2.3 == x", "$"] {
            assert!(Expr::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn literals_and_json() {
        assert_eq!(AdValue::parse_literal(" \"a \\\"b\\\"\" "), AdValue::Str("a \"b\"".into()));
        assert_eq!(AdValue::parse_literal("17"), AdValue::Int(17));
        assert_eq!(AdValue::parse_literal("-2.5"), AdValue::Real(-2.5));
        assert_eq!(AdValue::parse_literal("TRUE"), AdValue::Bool(true));
        let e = AdValue::parse_literal("RequestCpus * 2");
        assert_eq!(e.to_json_text(), r#""\/Expr(RequestCpus * 2)\/""#);
        assert_eq!(AdValue::Str("x\"y".into()).to_json_text(), r#""x\"y""#);
        assert_eq!(AdValue::Real(0.0).to_json_text(), "0.0");
    }
}
