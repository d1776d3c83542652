//! How topo lays out JSON: serde_json's pretty layout (two spaces a level), except that an
//! array of numbers stays on one line, and so, below the top-level fields, do an array of
//! strings and an object of such values that fits in [`LINE`] characters. A ring order, a tree's
//! column of parents or a path `{"from": 0, "to": 1, "type": "NVL", "bw_gbps": 20.0}` then
//! costs one line instead of one per value: at 131,072 GPUs the plan is 2.4 times smaller for
//! it (issue 28).
//!
//! serde_json hands the formatter one token at a time, so whether an object fits is not
//! known until it ends: its bytes are kept both ways ([`Trial`]) until it closes on one
//! line or stops fitting, whichever comes first.

use serde_json::ser::{CompactFormatter, Formatter};
use std::io::{Result, Write};

/// The longest object kept on one line, in bytes without its indent.
const LINE: usize = 100;

/// Arrays of strings and objects opened at this level or deeper (inside a top-level field's
/// value) may stay on one line. A top-level field's array of strings or objects never does:
/// the streamed document writes those in pieces, one element a line
/// ([`crate::doc::JsonObject`]); sentences read better one a line anyway.
const INLINE_FROM: usize = 2;

/// What the next value is, as far as the layout cares.
#[derive(Clone, Copy, PartialEq)]
enum Token {
    /// A number, `true`, `false` or `null`.
    Number,
    Str,
    Container,
}

#[derive(Clone, Copy, PartialEq)]
enum Frame {
    /// An array whose first element decides: scalars keep it on one line.
    Array(Option<bool>),
    Object,
}

/// An object being written both ways until it closes within [`LINE`] or stops fitting.
struct Trial {
    /// Containers open inside it, itself included.
    depth: usize,
    one_line: Vec<u8>,
    pretty: Vec<u8>,
}

pub(crate) struct Nested {
    level: usize,
    has_value: bool,
    frames: Vec<Frame>,
    /// The separator before the next array element, written once the element shows
    /// whether the array stays on one line: `Some(first)`.
    pending: Option<bool>,
    trial: Option<Trial>,
}

impl Nested {
    /// The layout starting `level` levels in, which is how a value sits inside the
    /// enclosing object.
    pub(crate) fn at(level: usize) -> Nested {
        Nested {
            level,
            has_value: false,
            frames: vec![],
            pending: None,
            trial: None,
        }
    }

    /// Writes `pretty` (or, inside a trial, both forms) to `w`. In pieces, so that the
    /// common case (no trial) copies nothing: a plan at 131,072 GPUs is 30 million tokens.
    fn put<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        pretty: &[&[u8]],
        one_line: &[u8],
    ) -> Result<()> {
        let Some(t) = &mut self.trial else {
            return pretty.iter().try_for_each(|p| w.write_all(p));
        };
        pretty.iter().for_each(|p| t.pretty.extend_from_slice(p));
        t.one_line.extend_from_slice(one_line);
        self.check_fit(w)
    }

    /// Inside a trial, after `one_line` grew from `at` by bytes both forms share.
    fn mirror<W: ?Sized + Write>(&mut self, w: &mut W, at: usize) -> Result<()> {
        if let Some(t) = &mut self.trial {
            let (line, pretty) = (&t.one_line, &mut t.pretty);
            pretty.extend_from_slice(&line[at..]);
        }
        self.check_fit(w)
    }

    fn check_fit<W: ?Sized + Write>(&mut self, w: &mut W) -> Result<()> {
        match &self.trial {
            Some(t) if t.one_line.len() > LINE => self.give_up(w),
            _ => Ok(()),
        }
    }

    /// The trial's object does not fit a line: what it wrote so far goes out pretty, and
    /// the rest follows pretty.
    fn give_up<W: ?Sized + Write>(&mut self, w: &mut W) -> Result<()> {
        match self.trial.take() {
            Some(t) => w.write_all(&t.pretty),
            None => Ok(()),
        }
    }

    /// A newline and this level's indent (deeper than [`SPACES`] allows is still JSON).
    fn newline(&self) -> [&'static [u8]; 2] {
        [b"\n", &SPACES[..(2 * self.level).min(SPACES.len())]]
    }

    /// Before any value: the array separator left pending, now that the value shows
    /// whether its array stays on one line.
    fn before_value<W: ?Sized + Write>(&mut self, w: &mut W, token: Token) -> Result<()> {
        let Some(first) = self.pending.take() else {
            return Ok(());
        };
        let one_line = match self.frames.last_mut() {
            Some(Frame::Array(mode @ None)) => {
                let inline = match token {
                    Token::Number => true,
                    Token::Str => self.level > INLINE_FROM,
                    Token::Container => false,
                };
                *mode = Some(inline);
                inline
            }
            Some(Frame::Array(Some(inline))) => *inline,
            _ => false,
        };
        if !one_line && self.trial.is_some() {
            // An array of containers is never one line.
            self.give_up(w)?;
        }
        let comma: &[u8] = if first { b"" } else { b", " };
        if one_line {
            return self.put(w, &[comma], comma);
        }
        let [nl, indent] = self.newline();
        let sep: &[u8] = if first { b"" } else { b"," };
        self.put(w, &[sep, nl, indent], comma)
    }

    fn open<W: ?Sized + Write>(&mut self, w: &mut W, frame: Frame) -> Result<()> {
        self.before_value(w, Token::Container)?;
        let c: &[u8] = if frame == Frame::Object { b"{" } else { b"[" };
        match &mut self.trial {
            // A nested object is not one line's worth.
            Some(_) if frame == Frame::Object => self.give_up(w)?,
            Some(t) => t.depth += 1,
            None => {}
        }
        if frame == Frame::Object && self.trial.is_none() && self.level >= INLINE_FROM {
            self.trial = Some(Trial {
                depth: 1,
                one_line: Vec::with_capacity(LINE + 32),
                pretty: Vec::with_capacity(2 * LINE),
            });
        }
        self.level += 1;
        self.has_value = false;
        self.frames.push(frame);
        self.put(w, &[c], c)
    }

    fn close<W: ?Sized + Write>(&mut self, w: &mut W, c: &[u8]) -> Result<()> {
        self.level -= 1;
        let frame = self.frames.pop();
        let inline_array = frame == Some(Frame::Array(Some(true)));
        if self.has_value && !inline_array {
            let [nl, indent] = self.newline();
            self.put(w, &[nl, indent, c], c)?;
        } else {
            self.put(w, &[c], c)?;
        }
        let done = match &mut self.trial {
            Some(t) => {
                t.depth -= 1;
                t.depth == 0
            }
            None => false,
        };
        if done && let Some(t) = self.trial.take() {
            w.write_all(&t.one_line)?;
        }
        Ok(())
    }
}

/// Indents: 2 spaces a level.
static SPACES: [u8; 256] = [b' '; 256];

/// Formatter methods that write one token the same in both forms, through serde_json's
/// compact formatter.
macro_rules! same_both_ways {
    ($($name:ident($($arg:ident: $t:ty),*)),* $(,)?) => {
        $(fn $name<W: ?Sized + Write>(&mut self, w: &mut W $(, $arg: $t)*) -> Result<()> {
            self.before_value(w, Token::Number)?;
            let Some(t) = &mut self.trial else {
                return CompactFormatter.$name(w $(, $arg)*);
            };
            let at = t.one_line.len();
            CompactFormatter.$name(&mut t.one_line $(, $arg)*)?;
            self.mirror(w, at)
        })*
    };
}

impl Formatter for Nested {
    same_both_ways!(
        write_null(), write_bool(v: bool), write_i8(v: i8), write_i16(v: i16),
        write_i32(v: i32), write_i64(v: i64), write_i128(v: i128), write_u8(v: u8),
        write_u16(v: u16), write_u32(v: u32), write_u64(v: u64), write_u128(v: u128),
        write_f32(v: f32), write_f64(v: f64), write_number_str(v: &str),
        write_raw_fragment(v: &str),
    );

    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> Result<()> {
        self.open(w, Frame::Array(None))
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> Result<()> {
        self.close(w, b"]")
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, _: &mut W, first: bool) -> Result<()> {
        self.pending = Some(first);
        Ok(())
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, _: &mut W) -> Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> Result<()> {
        self.open(w, Frame::Object)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> Result<()> {
        self.close(w, b"}")
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> Result<()> {
        let [nl, indent] = self.newline();
        let (sep, comma): (&[u8], &[u8]) = if first { (b"", b"") } else { (b",", b", ") };
        self.put(w, &[sep, nl, indent], comma)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> Result<()> {
        self.put(w, &[b": "], b": ")
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, _: &mut W) -> Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_string<W: ?Sized + Write>(&mut self, w: &mut W) -> Result<()> {
        self.before_value(w, Token::Str)?;
        self.put(w, &[b"\""], b"\"")
    }
    fn end_string<W: ?Sized + Write>(&mut self, w: &mut W) -> Result<()> {
        self.put(w, &[b"\""], b"\"")
    }
    fn write_string_fragment<W: ?Sized + Write>(&mut self, w: &mut W, s: &str) -> Result<()> {
        let Some(t) = &mut self.trial else {
            return write_safe_fragment(w, s);
        };
        let at = t.one_line.len();
        write_safe_fragment(&mut t.one_line, s)?;
        self.mirror(w, at)
    }
    fn write_char_escape<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        c: serde_json::ser::CharEscape,
    ) -> Result<()> {
        let Some(t) = &mut self.trial else {
            return CompactFormatter.write_char_escape(w, c);
        };
        let at = t.one_line.len();
        CompactFormatter.write_char_escape(&mut t.one_line, c)?;
        self.mirror(w, at)
    }
    fn write_byte_array<W: ?Sized + Write>(&mut self, w: &mut W, v: &[u8]) -> Result<()> {
        self.begin_array(w)?;
        for (i, x) in v.iter().enumerate() {
            self.begin_array_value(w, i == 0)?;
            Formatter::write_u8(self, w, *x)?;
            self.end_array_value(w)?;
        }
        self.end_array(w)
    }
}

/// A piece of a JSON string that serde_json left unescaped, with the C1 controls
/// (U+0080-U+009F: U+009B is a terminal's CSI, like ESC [) and the bidirectional controls
/// written as `\uXXXX`: a document piped to a terminal or pager cannot then drive it or
/// reorder what it shows. JSON readers get the same string.
fn write_safe_fragment<W: ?Sized + Write>(w: &mut W, s: &str) -> Result<()> {
    let mut start = 0;
    for (i, c) in s.char_indices() {
        if topo_source::escape::needs_escape(c) {
            w.write_all(&s.as_bytes()[start..i])?;
            write!(w, "\\u{:04x}", c as u32)?;
            start = i + c.len_utf8();
        }
    }
    w.write_all(&s.as_bytes()[start..])
}

#[cfg(test)]
mod tests {
    use serde::Serialize;
    use serde_json::json;

    fn laid_out(v: &impl Serialize) -> String {
        crate::doc::json(v).unwrap()
    }

    #[test]
    fn scalars_below_the_top_fields_stay_on_one_line() {
        let v = json!({
            "rings": [[0, 7, 6], [1, 2]],
            "top": [1, 2],
            "words": ["a", "b"],
            "trees": [{"ranks": [{"rank": 0, "up": -1, "down": [1, 8, -1]}]}],
            "empty": [[], {}],
        });
        let want = r#"{
  "empty": [
    [],
    {}
  ],
  "rings": [
    [0, 7, 6],
    [1, 2]
  ],
  "top": [1, 2],
  "trees": [
    {
      "ranks": [
        {"down": [1, 8, -1], "rank": 0, "up": -1}
      ]
    }
  ],
  "words": [
    "a",
    "b"
  ]
}
"#;
        assert_eq!(laid_out(&v), want);
    }

    #[test]
    fn an_object_that_does_not_fit_or_nests_one_is_pretty() {
        let long = "x".repeat(120);
        let v = json!({"a": [{"name": long, "n": 1}, {"inner": {"k": 1}, "z": [1, "s"]}]});
        let want = format!(
            r#"{{
  "a": [
    {{
      "n": 1,
      "name": "{long}"
    }},
    {{
      "inner": {{"k": 1}},
      "z": [1, "s"]
    }}
  ]
}}
"#
        );
        assert_eq!(laid_out(&v), want);
    }

    #[test]
    fn every_layout_reads_back_as_the_same_value() {
        let v = json!({
            "a": [[{"x": [1, [2, {"y": null}]]}], "s\u{9b}", 1.5, true, [], {}],
            "b": {"c": {"d": {"e": [[1], [2, 3], []]}}, "f": "g"},
            "long": [{"k": "v".repeat(200), "n": [1, 2, 3]}],
        });
        let back: serde_json::Value = serde_json::from_str(&laid_out(&v)).unwrap();
        assert_eq!(back, v);
    }
}
