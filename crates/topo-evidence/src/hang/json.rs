//! A tolerant reader for the JSON-like text hang tools print: NCCL RAS JSON (2.28.7+, whose
//! 2.28.7-2.28.9 writer drops a comma after `nvml_dev` when a rank is missing: see
//! `src/ras/client_support.cc` at v2.28.9-1 against v2.29.2-1), its monitor events (one object
//! after another), and Flight Recorder dumps printed from Python (tuples in parentheses,
//! `None`, `True`, and `...` where a tutorial elided entries).
//!
//! Commas are optional and a missing one is counted, `(`/`)` read as `[`/`]`. Nesting is
//! bounded ([`DEPTH_MAX`]) and the work is one pass over the text.

/// Deeper nesting than any of these formats has (RAS JSON is 5 levels, FR dumps 4).
pub const DEPTH_MAX: usize = 32;

#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// The number as written: RAS counts and nanosecond times overflow nothing as text.
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    pub fn u64(&self) -> Option<u64> {
        match self {
            Json::Num(n) => n.parse().ok(),
            Json::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
    pub fn i64(&self) -> Option<i64> {
        match self {
            Json::Num(n) => n.parse().ok(),
            _ => None,
        }
    }
    pub fn str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn arr(&self) -> &[Json] {
        match self {
            Json::Arr(a) => a,
            _ => &[],
        }
    }
    pub fn obj(&self) -> &[(String, Json)] {
        match self {
            Json::Obj(kv) => kv,
            _ => &[],
        }
    }
    /// The value as compact text (`[[3, 4]]`), for sizes quoted in a verdict.
    pub fn compact(&self) -> String {
        match self {
            Json::Null => "null".into(),
            Json::Bool(b) => b.to_string(),
            Json::Num(n) => n.clone(),
            Json::Str(s) => s.clone(),
            Json::Arr(a) => format!(
                "[{}]",
                a.iter().map(Json::compact).collect::<Vec<_>>().join(", ")
            ),
            Json::Obj(kv) => format!(
                "{{{}}}",
                kv.iter()
                    .map(|(k, v)| format!("{k}: {}", v.compact()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The values of a text, one after another, and how many commas had to be assumed.
#[derive(Debug, Default)]
pub struct Parsed {
    pub values: Vec<Json>,
    pub missing_commas: usize,
    /// Where reading stopped early, and why (bad token, nesting too deep).
    pub error: Option<String>,
}

struct P<'a> {
    b: &'a [u8],
    s: &'a str,
    i: usize,
    missing_commas: usize,
}

/// Every top-level value in `text`; stops at the first thing that is not one.
pub fn parse_all(text: &str) -> Parsed {
    let mut p = P {
        b: text.as_bytes(),
        s: text,
        i: 0,
        missing_commas: 0,
    };
    let mut out = Parsed::default();
    loop {
        p.ws();
        if p.i >= p.b.len() {
            break;
        }
        match p.value(0) {
            Ok(v) => out.values.push(v),
            Err(e) => {
                out.error = Some(e);
                break;
            }
        }
    }
    out.missing_commas = p.missing_commas;
    out
}

impl P<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > DEPTH_MAX {
            return Err(format!("nesting deeper than {DEPTH_MAX} levels"));
        }
        self.ws();
        let Some(&c) = self.b.get(self.i) else {
            return Err("the text ends inside a value".into());
        };
        match c {
            b'{' => self.object(depth),
            b'[' | b'(' => self.array(depth, if c == b'[' { b']' } else { b')' }),
            b'"' | b'\'' => self.string(c).map(Json::Str),
            _ => self.word(),
        }
    }

    /// Skips commas between members; notes when two members had none between them.
    fn separator(&mut self, first: bool) {
        self.ws();
        if self.b.get(self.i) == Some(&b',') {
            while self.b.get(self.i) == Some(&b',') {
                self.i += 1;
                self.ws();
            }
        } else if !first && !matches!(self.b.get(self.i), Some(b'}' | b']' | b')') | None) {
            self.missing_commas += 1;
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, String> {
        self.i += 1;
        let mut kv = vec![];
        let mut first = true;
        loop {
            self.separator(first);
            first = false;
            match self.b.get(self.i) {
                None => return Err("the text ends inside an object".into()),
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Json::Obj(kv));
                }
                _ => {}
            }
            let key = match self.value(depth + 1)? {
                Json::Str(s) | Json::Num(s) => s,
                Json::Null if self.elided() => continue,
                other => return Err(format!("a key is not a string: {}", other.compact())),
            };
            self.ws();
            if self.b.get(self.i) != Some(&b':') {
                return Err(format!("no `:` after the key {key:?}"));
            }
            self.i += 1;
            let v = self.value(depth + 1)?;
            kv.push((key, v));
        }
    }

    fn array(&mut self, depth: usize, close: u8) -> Result<Json, String> {
        self.i += 1;
        let mut items = vec![];
        let mut first = true;
        loop {
            self.separator(first);
            first = false;
            match self.b.get(self.i) {
                None => return Err("the text ends inside a list".into()),
                Some(&c) if c == close || c == b']' || c == b')' => {
                    self.i += 1;
                    return Ok(Json::Arr(items));
                }
                _ => {}
            }
            let v = self.value(depth + 1)?;
            if !(v == Json::Null && self.elided()) {
                items.push(v);
            }
        }
    }

    /// Whether the word just read was a `...` elision (skipped, not a value).
    fn elided(&self) -> bool {
        self.s[..self.i].ends_with("...")
    }

    fn string(&mut self, quote: u8) -> Result<String, String> {
        self.i += 1;
        let mut out = String::new();
        let mut start = self.i;
        while let Some(&c) = self.b.get(self.i) {
            if c == quote {
                out.push_str(&self.s[start..self.i]);
                self.i += 1;
                return Ok(out);
            }
            if c == b'\\' {
                out.push_str(&self.s[start..self.i]);
                let esc = self.b.get(self.i + 1).copied().unwrap_or(b'\\');
                self.i += 2;
                match esc {
                    b'n' => out.push('\n'),
                    b't' => out.push('\t'),
                    b'u' => {
                        let hex = self.s.get(self.i..self.i + 4).unwrap_or("");
                        let ch = u32::from_str_radix(hex, 16).ok().and_then(char::from_u32);
                        out.push(ch.unwrap_or('\u{fffd}'));
                        self.i = (self.i + 4).min(self.b.len());
                    }
                    other => out.push(other as char),
                }
                start = self.i.min(self.b.len());
                continue;
            }
            self.i += 1;
        }
        Err("the text ends inside a string".into())
    }

    /// A number, `true`/`false`/`null` (and Python's `True`/`False`/`None`), or `...`.
    fn word(&mut self) -> Result<Json, String> {
        let start = self.i;
        while let Some(&c) = self.b.get(self.i) {
            if c.is_ascii_alphanumeric() || b"+-._".contains(&c) {
                self.i += 1;
            } else {
                break;
            }
        }
        let w = &self.s[start..self.i];
        match w {
            "" => Err(format!(
                "unexpected `{}`",
                self.s[start..].chars().next().unwrap_or(' ')
            )),
            "true" | "True" => Ok(Json::Bool(true)),
            "false" | "False" => Ok(Json::Bool(false)),
            "null" | "None" | "..." => Ok(Json::Null),
            _ if w.parse::<f64>().is_ok() => Ok(Json::Num(w.to_string())),
            _ => Err(format!("unexpected word `{w}`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_reads_valid_json_and_the_ras_2_28_defect() {
        let p = parse_all(r#"{"a": 1, "b": [true, null, "x\"y"], "c": {"d": -2.5}}"#);
        assert_eq!(p.values.len(), 1);
        assert_eq!(p.missing_commas, 0);
        let v = &p.values[0];
        assert_eq!(v.get("a").and_then(Json::u64), Some(1));
        assert_eq!(v.get("b").unwrap().arr()[2].str(), Some("x\"y"));
        let bad = parse_all("{\"nvml_dev\": 1\n \"status\": {\"unresponsive\": true}}");
        assert_eq!(bad.missing_commas, 1);
        assert_eq!(
            bad.values[0].get("status").unwrap().get("unresponsive"),
            Some(&Json::Bool(true))
        );
    }

    #[test]
    fn json_reads_python_tuples_elisions_and_a_stream() {
        let p = parse_all(r#"{"pg": ("0", "default_pg"), "e": [{"x": None}, ...]} {"y": 2}"#);
        assert_eq!(p.values.len(), 2);
        assert_eq!(p.values[0].get("pg").unwrap().arr().len(), 2);
        assert_eq!(p.values[0].get("e").unwrap().arr().len(), 1);
        assert!(p.error.is_none());
    }

    #[test]
    fn json_stops_on_garbage_and_deep_nesting() {
        assert!(parse_all("{\"a\": @}").error.is_some());
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert!(parse_all(&deep).error.unwrap().contains("nesting"));
        assert!(parse_all("{\"a\": \"open").error.is_some());
    }
}
