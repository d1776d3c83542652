//! How deeply a YAML text nests its lists and maps, measured by the parser yaml_serde itself
//! uses (libyaml, as `libyaml-rs`), stopping at the first level past the limit.
//!
//! libyaml's scanner does work proportional to the flow nesting depth for every token, so a
//! 200 KB line of `[` takes a minute to load. A character pre-scan cannot tell a quote that
//! opens a scalar from one inside a plain scalar (`name: a 'b`) without re-implementing
//! YAML's indentation rules, and every mistake there was a way around the guard. The parser's
//! own event stream has no such gap: it is exactly what yaml_serde will see. Stopping at the
//! first collection past the limit bounds the work to the limit times the input size (the
//! scanner looks at most 1024 characters ahead of the last event).

use libyaml_rs as sys;
use std::mem::MaybeUninit;

/// A collection that opened deeper than the limit: 1-based line and column of its start.
#[derive(Debug, PartialEq, Eq)]
pub struct TooDeep {
    pub line: u64,
    pub column: u64,
}

/// Fails at the first list or map (flow `[`/`{` or an indented block) nested deeper than
/// `limit`. A syntax error ends the check with `Ok`: yaml_serde then reports that error
/// itself, having done no more work than this check did up to the same point.
pub fn check(text: &str, limit: usize) -> Result<(), TooDeep> {
    let mut parser = Parser::new(text.as_bytes());
    let mut depth = 0usize;
    while let Some((kind, mark)) = parser.next_event() {
        match kind {
            sys::YAML_SEQUENCE_START_EVENT | sys::YAML_MAPPING_START_EVENT => {
                depth += 1;
                if depth > limit {
                    return Err(TooDeep {
                        line: mark.line + 1,
                        column: mark.column + 1,
                    });
                }
            }
            sys::YAML_SEQUENCE_END_EVENT | sys::YAML_MAPPING_END_EVENT => {
                depth = depth.saturating_sub(1);
            }
            sys::YAML_STREAM_END_EVENT => break,
            _ => {}
        }
    }
    Ok(())
}

/// An owned libyaml parser over a borrowed input. Boxed because libyaml keeps a pointer to
/// the parser inside itself (its read handler's data), so it must never move.
struct Parser<'a> {
    sys: Box<MaybeUninit<sys::yaml_parser_t>>,
    _input: &'a [u8],
    /// `yaml_parser_initialize` succeeded, so there is something to free.
    initialised: bool,
    /// A syntax error or the end of the stream was reached: no more events.
    done: bool,
}

impl<'a> Parser<'a> {
    fn new(input: &'a [u8]) -> Parser<'a> {
        let mut sys = Box::new(MaybeUninit::<sys::yaml_parser_t>::uninit());
        let p = sys.as_mut_ptr();
        // SAFETY: `p` points at boxed memory that outlives the parser and never moves;
        // `input` is borrowed for the parser's whole life ('a), as libyaml requires.
        // Initialisation only fails on allocation failure, which aborts first in Rust.
        let ok = unsafe {
            let ok = sys::yaml_parser_initialize(p).ok;
            if ok {
                sys::yaml_parser_set_encoding(p, sys::YAML_UTF8_ENCODING);
                sys::yaml_parser_set_input_string(p, input.as_ptr(), input.len() as u64);
            }
            ok
        };
        Parser {
            sys,
            _input: input,
            initialised: ok,
            done: !ok,
        }
    }

    /// The next event's kind and start, or `None` at a syntax error or after the stream ends.
    fn next_event(&mut self) -> Option<(sys::yaml_event_type_t, sys::yaml_mark_t)> {
        if self.done {
            return None;
        }
        let p = self.sys.as_mut_ptr();
        let mut event = MaybeUninit::<sys::yaml_event_t>::uninit();
        // SAFETY: the parser was initialised in `new` and has not failed (`done` is false:
        // libyaml must not be called again after an error); an event that
        // `yaml_parser_parse` filled in is read and then freed exactly once.
        unsafe {
            if sys::yaml_parser_parse(p, event.as_mut_ptr()).fail {
                self.done = true;
                return None;
            }
            let e = event.as_mut_ptr();
            let out = ((*e).type_, (*e).start_mark);
            sys::yaml_event_delete(e);
            Some(out)
        }
    }
}

impl Drop for Parser<'_> {
    fn drop(&mut self) {
        if self.initialised {
            // SAFETY: only a parser that `yaml_parser_initialize` set up is deleted; a failed
            // initialisation frees what it allocated itself.
            unsafe { sys::yaml_parser_delete(self.sys.as_mut_ptr()) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// How deep yaml_serde's own value nests (what the check must agree with).
    fn value_depth(v: &yaml_serde::Value) -> usize {
        use yaml_serde::Value;
        match v {
            Value::Sequence(s) => 1 + s.iter().map(value_depth).max().unwrap_or(0),
            Value::Mapping(m) => {
                1 + m
                    .iter()
                    .map(|(k, v)| value_depth(k).max(value_depth(v)))
                    .max()
                    .unwrap_or(0)
            }
            Value::Tagged(t) => value_depth(&t.value),
            _ => 0,
        }
    }

    fn deep(text: &str, limit: usize) -> Option<(u64, u64)> {
        check(text, limit).err().map(|e| (e.line, e.column))
    }

    #[test]
    fn a_quote_inside_a_plain_scalar_hides_nothing() {
        // The bypass of the old character scan: `'` after a space inside a plain scalar was
        // taken for an opening quote, and every bracket after it was skipped.
        let n = 100_000;
        let text = format!(
            "name: a 'b\ntemplates: {}{}\n",
            "[".repeat(n),
            "]".repeat(n)
        );
        // The top-level map is the first level, so the 64th `[` is the 65th.
        assert_eq!(deep(&text, 64), Some((2, 75)));
        // The same trick on a continuation line of a plain scalar, and with `#` and `"`.
        for head in ["name: a\n  'b\n", "name: a \"b\n", "name: 'it''s' # x'\n"] {
            let text = format!("{head}t: {}{}\n", "[".repeat(100), "]".repeat(100));
            assert!(deep(&text, 64).is_some(), "{head:?}");
        }
    }

    #[test]
    fn brackets_inside_real_strings_and_comments_do_not_count() {
        let b = "[".repeat(100);
        for text in [
            format!("a: '{b}'\n"),
            format!("a: \"{b}\\\"{b}\"\n"),
            format!("a: 'x''{b}'\n"),
            format!("a: 1 # {b}\n"),
            format!("a: |\n  {b}\n  '\nb: 1\n"),
            format!("a: >\n  {b}\n"),
            format!("a: x{b}\n"),
        ] {
            assert_eq!(deep(&text, 64), None, "{text}");
        }
    }

    #[test]
    fn block_nesting_counts_too() {
        let text = format!("{}x\n", "- ".repeat(65));
        assert_eq!(deep(&text, 64), Some((1, 129)));
        let mut text = String::new();
        for i in 0..65 {
            text += &format!("{}k{i}:\n", "  ".repeat(i));
        }
        assert_eq!(deep(&text, 64).map(|(l, _)| l), Some(65));
        assert_eq!(deep(&format!("{}x\n", "- ".repeat(64)), 64), None);
    }

    #[test]
    fn a_syntax_error_ends_the_check() {
        assert_eq!(deep("a: [\n", 64), None);
        assert_eq!(deep("a: 'open\n", 64), None);
        assert_eq!(deep("", 64), None);
    }

    /// Pieces that make YAML's quoting hard: quotes, escapes, comments, block scalars,
    /// indentation, flow and block collections.
    fn piece() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "[", "]", "{", "}", ",", ":", ": ", "- ", "? ", "'", "''", "\"", "\\\"", "\\", "#",
            " #", "|", ">", "|-\n", "a", "b c", " ", "  ", "\n", "\n  ", "\n    ", "\t", "k: ",
            "x:\n", "---\n", "...\n", "%", "@",
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Whatever yaml_serde would load deeper than the limit is refused, and whatever it
        /// loads within the limit is not.
        #[test]
        fn agrees_with_yaml_serde(pieces in prop::collection::vec(piece(), 0..60), limit in 0usize..4) {
            let text: String = pieces.concat();
            if let Ok(v) = yaml_serde::from_str::<yaml_serde::Value>(&text) {
                let refused = check(&text, limit).is_err();
                prop_assert_eq!(refused, value_depth(&v) > limit, "{:?}", text);
            }
        }
    }
}
