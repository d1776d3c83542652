//! A tiny reader for the XML subset NCCL reads and writes, into a generic element tree.
//!
//! NCCL's own reader (`src/graph/xml.cc`, all versions) is a hand-written tokenizer, not a
//! general XML parser; this one accepts the same subset plus what a generic tool writes around
//! it: comments, `<?xml …?>` declarations, `<!DOCTYPE …>`, the five predefined entities and
//! numeric character references. Positions are kept for every element so that errors and
//! warnings can name a line and column. It never recurses, so input cannot exhaust the stack.

use std::fmt;

/// Deeper nesting than any topology needs (NCCL files are 5–8 levels deep): rejecting it keeps
/// every recursive walk over the tree bounded.
pub const MAX_DEPTH: usize = 64;

/// Most child elements one element may have: NCCL 2.30's reader limit (earlier versions
/// allow fewer). Together with [`MAX_ELEMENTS`] it keeps building the model near-linear.
pub const MAX_CHILDREN: usize = 640;

/// Attributes NCCL's reader keeps per element (`MAX_ATTR_COUNT`, all versions); it reads
/// and ignores the rest. Bounding them also bounds the repeated-attribute check.
pub const MAX_ATTRS: usize = 16;

/// Longest element name, attribute name or attribute value NCCL's reader holds
/// (`MAX_STR_LEN` in src/include/xml.h, all versions); its tokenizer fails on a longer one,
/// so this one does too, naming where it starts.
pub const MAX_VALUE_CHARS: usize = 255;

/// Most elements in one file: NCCL 2.30's limit for its largest XML (a graph file); a
/// topology file holds a few hundred.
pub const MAX_ELEMENTS: usize = 65536;

/// One element with its attributes in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Element>,
    pub pos: Pos,
}

impl Element {
    /// The first value of attribute `key`, as NCCL's lookup returns it.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// 1-based line and column (in characters) of a place in the text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {} column {}", self.line, self.col)
    }
}

/// A syntax error at a position.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntaxError {
    pub pos: Pos,
    pub msg: String,
}

/// The parsed document: top-level elements plus remarks about tolerated oddities.
#[derive(Debug, Default)]
pub struct Document {
    pub roots: Vec<Element>,
    pub warnings: Vec<String>,
    /// Where the file stops with elements still open: it was cut, and `roots` hold what
    /// came before.
    pub cut: Option<Pos>,
}

/// Line/column of a byte offset (counting characters, not bytes, within the line).
pub fn pos_at(text: &str, offset: usize) -> Pos {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before
        .get(line_start..)
        .map(|s| s.chars().count())
        .unwrap_or(0)
        + 1;
    Pos {
        line: line as u32,
        col: col as u32,
    }
}

struct Lexer<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    warnings: Vec<String>,
    /// The last position computed: tags come in file order, so each position is found by
    /// counting on from the previous one (counting from the start made parsing quadratic).
    cursor: std::cell::Cell<(usize, Pos)>,
    elements: usize,
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':')
}

impl<'a> Lexer<'a> {
    /// [`pos_at`] in amortised constant time for offsets that only grow.
    fn pos(&self, offset: usize) -> Pos {
        let offset = offset.min(self.text.len());
        let (from, at) = self.cursor.get();
        let pos = match self.text.get(from..offset) {
            Some(gap) if offset >= from => match gap.rfind('\n') {
                Some(nl) => Pos {
                    line: at.line + gap.matches('\n').count() as u32,
                    col: gap.get(nl + 1..).map_or(0, |t| t.chars().count()) as u32 + 1,
                },
                None => Pos {
                    line: at.line,
                    col: at.col + gap.chars().count() as u32,
                },
            },
            _ => pos_at(self.text, offset),
        };
        self.cursor.set((offset, pos));
        pos
    }

    /// Adds a finished element under its parent (or as a root), within NCCL's limits.
    fn attach(
        &mut self,
        stack: &mut [(Element, usize)],
        roots: &mut Vec<Element>,
        el: Element,
    ) -> Result<(), SyntaxError> {
        self.elements += 1;
        if self.elements > MAX_ELEMENTS {
            return Err(SyntaxError {
                pos: el.pos,
                msg: format!("more than {MAX_ELEMENTS} elements; no topology is this large"),
            });
        }
        let (siblings, parent) = match stack.last_mut() {
            Some((parent, _)) => (
                &mut parent.children,
                Some((parent.name.clone(), parent.pos)),
            ),
            None => (roots, None),
        };
        if siblings.len() >= MAX_CHILDREN {
            let within = match parent {
                Some((name, pos)) => format!("<{name}> opened at {pos}"),
                None => "the file".into(),
            };
            return Err(SyntaxError {
                pos: el.pos,
                msg: format!(
                    "{within} has more than {MAX_CHILDREN} child elements (NCCL reads at most {MAX_CHILDREN})"
                ),
            });
        }
        siblings.push(el);
        Ok(())
    }

    fn err<T>(&self, at: usize, msg: impl Into<String>) -> Result<T, SyntaxError> {
        Err(SyntaxError {
            pos: pos_at(self.text, at),
            msg: msg.into(),
        })
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn starts_with(&self, s: &str) -> bool {
        self.bytes
            .get(self.at..)
            .is_some_and(|r| r.starts_with(s.as_bytes()))
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    /// Skips past `end`, or fails naming what was left open where.
    fn skip_past(&mut self, end: &str, what: &str, opened: usize) -> Result<(), SyntaxError> {
        match self.text.get(self.at..).and_then(|r| r.find(end)) {
            Some(i) => {
                self.at += i + end.len();
                Ok(())
            }
            None => self.err(
                self.text.len(),
                format!(
                    "unexpected end of file: {what} opened at {} is not closed",
                    pos_at(self.text, opened)
                ),
            ),
        }
    }

    fn name(&mut self) -> Result<String, SyntaxError> {
        let start = self.at;
        while self.peek().is_some_and(is_name_byte) {
            self.at += 1;
        }
        if self.at - start > MAX_VALUE_CHARS {
            return self.err(
                start,
                format!(
                    "a name of {} characters; NCCL reads names of at most {MAX_VALUE_CHARS}",
                    self.at - start
                ),
            );
        }
        if self.at == start {
            return match self.peek() {
                None => self.err(self.at, "unexpected end of file: expected a name"),
                Some(_) => self.err(
                    self.at,
                    format!("expected a name, found {}", self.describe_here()),
                ),
            };
        }
        Ok(self
            .text
            .get(start..self.at)
            .unwrap_or_default()
            .to_string())
    }

    fn describe_here(&self) -> String {
        match self.text.get(self.at..).and_then(|r| r.chars().next()) {
            None => "end of file".into(),
            Some(c) if c.is_control() => format!("control character {:#04x}", c as u32),
            Some(c) => format!("'{c}'"),
        }
    }

    /// Reads a start tag after its `<`; returns the element (without children) and whether
    /// it closed itself.
    fn start_tag(&mut self, lt: usize) -> Result<(Element, bool), SyntaxError> {
        let pos = self.pos(lt);
        let name = self.name()?;
        let mut attrs: Vec<(String, String)> = Vec::new();
        let mut dropped = false;
        loop {
            let before_ws = self.at;
            self.skip_ws();
            match self.peek() {
                None => {
                    return self.err(
                        self.text.len(),
                        format!("unexpected end of file inside the tag <{name}> opened at {pos}"),
                    );
                }
                Some(b'>') => {
                    self.at += 1;
                    return Ok((
                        Element {
                            name,
                            attrs,
                            children: vec![],
                            pos,
                        },
                        false,
                    ));
                }
                Some(b'/') => {
                    self.at += 1;
                    if self.peek() != Some(b'>') {
                        return self.err(self.at, format!("expected '>' after '/' in <{name}>"));
                    }
                    self.at += 1;
                    return Ok((
                        Element {
                            name,
                            attrs,
                            children: vec![],
                            pos,
                        },
                        true,
                    ));
                }
                Some(_) => {
                    if self.at == before_ws {
                        return self.err(
                            self.at,
                            format!("expected whitespace, '>' or '/>' in <{name}>"),
                        );
                    }
                    let key_at = self.at;
                    let key = self.name()?;
                    self.skip_ws();
                    if self.peek() != Some(b'=') {
                        return self.err(
                            self.at,
                            format!("expected '=' after attribute '{key}' of <{name}>"),
                        );
                    }
                    self.at += 1;
                    self.skip_ws();
                    let quote = match self.peek() {
                        Some(q @ (b'"' | b'\'')) => q,
                        // NCCL's reader compiles unquoted values out.
                        _ => {
                            return self.err(
                                self.at,
                                format!("value of attribute '{key}' of <{name}> must be quoted"),
                            );
                        }
                    };
                    self.at += 1;
                    let start = self.at;
                    while self.peek().is_some_and(|b| b != quote && b != b'<') {
                        self.at += 1;
                    }
                    match self.peek() {
                        Some(b'<') => {
                            return self.err(
                                self.at,
                                format!("'<' inside the value of attribute '{key}' of <{name}>"),
                            );
                        }
                        None => {
                            return self.err(
                                self.text.len(),
                                format!("unexpected end of file inside the value of attribute '{key}' of <{name}>"),
                            );
                        }
                        _ => {}
                    }
                    let raw = self.text.get(start..self.at).unwrap_or_default();
                    self.at += 1;
                    if attrs.len() >= MAX_ATTRS {
                        if !dropped {
                            dropped = true;
                            self.warnings.push(format!(
                                "{}: <{name}> has more than {MAX_ATTRS} attributes; the rest are ignored, as NCCL does",
                                self.pos(key_at)
                            ));
                        }
                        continue;
                    }
                    if attrs.iter().any(|(k, _)| *k == key) {
                        self.warnings.push(format!(
                            "{}: <{name}> repeats attribute '{key}'; the first value is used, as NCCL does",
                            self.pos(key_at)
                        ));
                    }
                    let value = decode_entities(raw);
                    let chars = value.chars().count();
                    if chars > MAX_VALUE_CHARS {
                        return self.err(
                            start,
                            format!(
                                "<{name}> {key} is {chars} characters long; NCCL reads values of at most {MAX_VALUE_CHARS} and refuses longer ones"
                            ),
                        );
                    }
                    attrs.push((key, value));
                }
            }
        }
    }

    /// A file that stops with elements still open was cut (a dump copied from a terminal, a
    /// size limit, a paste): its finished elements are kept under the containers that were
    /// open (`<system>`, `<cpu>`, a PCI bridge: what they already hold is what the machine has
    /// so far), and the element being read when the file stopped is dropped, since half a
    /// GPU or NIC would state NVLinks or ports it may not have. The warning says where the
    /// file stops, so nothing later in the file is taken as absent.
    fn salvage(
        &mut self,
        mut stack: Vec<(Element, usize)>,
        roots: &mut Vec<Element>,
        stop: usize,
    ) -> Result<(), SyntaxError> {
        let (innermost, open_at) = match stack.last() {
            Some((el, at)) => (el.name.clone(), *at),
            None => return Ok(()),
        };
        let mut dropped = Vec::new();
        while let Some((el, at)) = stack.pop() {
            let container = matches!(el.name.as_str(), "system" | "cpu")
                || (el.name == "pci" && el.attr("class").is_some_and(|c| c.starts_with("0x0604")));
            if container {
                self.attach(&mut stack, roots, el)?;
            } else {
                dropped.push(format!("<{}> opened at {}", el.name, pos_at(self.text, at)));
            }
        }
        let unfinished = if dropped.is_empty() {
            String::new()
        } else {
            format!("; dropped the unfinished {}", dropped.join(" in "))
        };
        self.warnings.push(format!(
            "{}: the file is cut here, inside <{innermost}> opened at {}: read what it holds up to there{unfinished}; devices after the cut are unknown, not absent (dump the topology again with NCCL_TOPO_DUMP_FILE)",
            pos_at(self.text, stop),
            pos_at(self.text, open_at)
        ));
        Ok(())
    }

    fn parse(mut self) -> Result<Document, SyntaxError> {
        // A UTF-8 byte order mark is invisible to editors; tolerate it.
        if self.starts_with("\u{feff}") {
            self.at += 3;
        }
        let mut roots: Vec<Element> = Vec::new();
        // Open elements with the byte offset of their `<`.
        let mut stack: Vec<(Element, usize)> = Vec::new();
        let mut warned_text = false;
        let mut cut = None;
        loop {
            let text_start = self.at;
            while self.peek().is_some_and(|b| b != b'<') {
                self.at += 1;
            }
            let chunk = self.text.get(text_start..self.at).unwrap_or_default();
            if let Some(off) = chunk.find(|c: char| !c.is_whitespace()) {
                let at = text_start + off;
                if stack.is_empty() && roots.is_empty() {
                    return self.err(
                        at,
                        format!("expected '<', found {}", {
                            let c = chunk
                                .get(off..)
                                .and_then(|r| r.chars().next())
                                .unwrap_or(' ');
                            if c.is_control() {
                                format!("control character {:#04x}", c as u32)
                            } else {
                                format!("'{c}'")
                            }
                        }),
                    );
                }
                if !warned_text {
                    warned_text = true;
                    self.warnings.push(format!(
                        "{}: text outside of tags is ignored (NCCL's reader ignores it too)",
                        pos_at(self.text, at)
                    ));
                }
            }
            let lt = self.at;
            if self.peek().is_none() {
                break;
            }
            if self.starts_with("<!--") {
                self.at += 4;
                self.skip_past("-->", "a comment", lt)?;
                continue;
            }
            if self.starts_with("<?") {
                self.at += 2;
                self.skip_past("?>", "a processing instruction", lt)?;
                self.warnings.push(format!(
                    "{}: ignoring an <?…?> declaration; NCCL's reader does not accept it, remove it before using the file as NCCL_TOPO_FILE",
                    pos_at(self.text, lt)
                ));
                continue;
            }
            if self.starts_with("<![CDATA[") {
                self.at += 9;
                self.skip_past("]]>", "a CDATA section", lt)?;
                continue;
            }
            if self.starts_with("<!") {
                self.at += 2;
                self.skip_past(">", "a <! declaration", lt)?;
                self.warnings.push(format!(
                    "{}: ignoring a <!…> declaration",
                    pos_at(self.text, lt)
                ));
                continue;
            }
            self.at += 1;
            if self.peek() == Some(b'/') {
                self.at += 1;
                let name = self.name()?;
                self.skip_ws();
                if self.peek() != Some(b'>') {
                    return self.err(
                        self.at,
                        format!(
                            "expected '>' to end </{name}>, found {}",
                            self.describe_here()
                        ),
                    );
                }
                self.at += 1;
                match stack.pop() {
                    None => {
                        return self
                            .err(lt, format!("closing tag </{name}> without an opening tag"));
                    }
                    Some((el, open_at)) if el.name != name => {
                        return self.err(
                            lt,
                            format!(
                                "expected </{}> to close the tag opened at {}, found </{name}>",
                                el.name,
                                pos_at(self.text, open_at)
                            ),
                        );
                    }
                    Some((el, _)) => self.attach(&mut stack, &mut roots, el)?,
                }
                continue;
            }
            let (el, closed) = match self.start_tag(lt) {
                Ok(tag) => tag,
                // The file stops inside a tag: what came before it may still be a machine.
                Err(_) if self.peek().is_none() && !stack.is_empty() => {
                    cut = Some(lt);
                    break;
                }
                Err(e) => return Err(e),
            };
            if stack.len() >= MAX_DEPTH {
                return self.err(
                    lt,
                    format!("elements nested deeper than {MAX_DEPTH} levels"),
                );
            }
            if closed {
                self.attach(&mut stack, &mut roots, el)?;
            } else {
                stack.push((el, lt));
            }
        }
        let stop = cut.unwrap_or(self.text.len());
        let cut = (!stack.is_empty()).then(|| pos_at(self.text, stop));
        self.salvage(stack, &mut roots, stop)?;
        Ok(Document {
            roots,
            cut,
            warnings: self.warnings,
        })
    }
}

/// Replaces the predefined entities and numeric character references; anything else is kept
/// as written (NCCL itself decodes nothing, and its writer escapes nothing).
fn decode_entities(raw: &str) -> String {
    if !raw.contains('&') {
        return raw.to_string();
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find('&') {
        out.push_str(rest.get(..i).unwrap_or_default());
        let tail = rest.get(i..).unwrap_or_default();
        let end = tail.find(';').filter(|&e| e <= 10);
        let decoded = end.and_then(|e| {
            let ent = tail.get(1..e)?;
            let c = match ent {
                "lt" => '<',
                "gt" => '>',
                "amp" => '&',
                "quot" => '"',
                "apos" => '\'',
                _ => {
                    let n = if let Some(h) =
                        ent.strip_prefix("#x").or_else(|| ent.strip_prefix("#X"))
                    {
                        u32::from_str_radix(h, 16).ok()?
                    } else {
                        ent.strip_prefix('#')?.parse::<u32>().ok()?
                    };
                    char::from_u32(n)?
                }
            };
            Some((c, e + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = tail.get(len..).unwrap_or_default();
            }
            None => {
                out.push('&');
                rest = tail.get(1..).unwrap_or_default();
            }
        }
    }
    out.push_str(rest);
    out
}

/// Parses `text` into a document. Errors carry the line and column where reading stopped.
pub fn parse(text: &str) -> Result<Document, SyntaxError> {
    Lexer {
        text,
        bytes: text.as_bytes(),
        at: 0,
        warnings: Vec::new(),
        cursor: std::cell::Cell::new((0, Pos { line: 1, col: 1 })),
        elements: 0,
    }
    .parse()
}

/// Decodes file bytes as UTF-8, or names the position of the first byte that is not.
pub fn decode_utf8(bytes: &[u8]) -> Result<&str, SyntaxError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let good = e.valid_up_to();
        let text = std::str::from_utf8(bytes.get(..good).unwrap_or_default()).unwrap_or_default();
        SyntaxError {
            pos: pos_at(text, good),
            msg: "not UTF-8 text (is this a binary file?)".into(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_counted_on_match_positions_counted_from_the_start() {
        let text = "<a>\n  <b x=\"é\"/><c/>\n\n   <d>\n</d></a>";
        let doc = parse(text).unwrap();
        let a = &doc.roots[0];
        let expect = |name: &str| pos_at(text, text.find(&format!("<{name}")).unwrap());
        assert_eq!(a.pos, expect("a"));
        for el in &a.children {
            assert_eq!(el.pos, expect(&el.name), "{}", el.name);
        }
        assert_eq!(a.children[1].pos, Pos { line: 2, col: 13 });
    }

    #[test]
    fn names_and_values_over_255_characters_are_errors() {
        let ok = format!("<a v=\"{}\"/>", "é".repeat(255));
        assert_eq!(
            parse(&ok).unwrap().roots[0]
                .attr("v")
                .unwrap()
                .chars()
                .count(),
            255
        );
        let e = parse(&format!("<a>\n <b v=\"{}\"/></a>", "x".repeat(1_000_000))).unwrap_err();
        assert_eq!(e.pos, Pos { line: 2, col: 8 });
        assert!(
            e.msg.contains("<b> v is 1000000 characters long"),
            "{}",
            e.msg
        );
        assert!(e.msg.len() < 200, "{}", e.msg);
        let e = parse(&format!("<a {}=\"1\"/>", "n".repeat(256))).unwrap_err();
        assert_eq!(e.pos, Pos { line: 1, col: 4 });
        assert!(e.msg.contains("a name of 256 characters"), "{}", e.msg);
    }

    #[test]
    fn attributes_beyond_sixteen_are_ignored_once() {
        let attrs: String = (0..100_000).map(|i| format!(" a{i}=\"{i}\"")).collect();
        let doc = parse(&format!("<a{attrs}/>")).unwrap();
        assert_eq!(doc.roots[0].attrs.len(), MAX_ATTRS);
        assert_eq!(doc.roots[0].attr("a15"), Some("15"));
        assert_eq!(doc.roots[0].attr("a16"), None);
        assert_eq!(doc.warnings.len(), 1, "{:?}", doc.warnings);
        assert!(doc.warnings[0].contains("<a> has more than 16 attributes"));
    }

    #[test]
    fn child_and_element_limits() {
        let wide = format!("<a>{}</a>", "<b/>".repeat(MAX_CHILDREN + 1));
        let e = parse(&wide).unwrap_err();
        assert!(
            e.msg
                .contains("<a> opened at line 1 column 1 has more than 640 child"),
            "{}",
            e.msg
        );
        assert_eq!(
            e.pos,
            Pos {
                line: 1,
                col: 4 + 4 * MAX_CHILDREN as u32
            }
        );
        let ok = format!("<a>{}</a>", "<b/>".repeat(MAX_CHILDREN));
        assert_eq!(parse(&ok).unwrap().roots[0].children.len(), MAX_CHILDREN);
        let many = format!(
            "<a>{}</a>",
            "<b>".to_string() + &"<c/>".repeat(600) + "</b>"
        )
        .repeat(120);
        let e = parse(&many).unwrap_err();
        assert!(e.msg.contains("more than 65536 elements"), "{}", e.msg);
    }

    fn one(text: &str) -> Element {
        let mut d = parse(text).unwrap();
        assert_eq!(d.roots.len(), 1);
        d.roots.remove(0)
    }

    #[test]
    fn reads_nested_elements_with_ordered_attributes() {
        let e = one(
            "<system version=\"1\">\n  <cpu numaid='0' arch=\"x86_64\">\n    <pci busid=\"0000:01:00.0\"/>\n  </cpu>\n</system>\n",
        );
        assert_eq!(e.name, "system");
        assert_eq!(e.attr("version"), Some("1"));
        let cpu = &e.children[0];
        assert_eq!(
            cpu.attrs,
            vec![
                ("numaid".into(), "0".into()),
                ("arch".into(), "x86_64".into())
            ]
        );
        assert_eq!(cpu.pos, Pos { line: 2, col: 3 });
        assert_eq!(cpu.children[0].pos, Pos { line: 3, col: 5 });
        assert_eq!(cpu.children[0].attr("busid"), Some("0000:01:00.0"));
    }

    #[test]
    fn comments_declarations_and_entities_are_tolerated() {
        let d = parse("<?xml version=\"1.0\"?>\n<!-- a\n comment --><system v=\"a&amp;b&#x41;&zz;\"> <!-- x --> </system>").unwrap();
        assert_eq!(d.roots.len(), 1);
        assert_eq!(d.roots[0].attr("v"), Some("a&bA&zz;"));
        assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    }

    #[test]
    fn a_cut_file_keeps_its_finished_part_and_drops_the_unfinished_device() {
        let d =
            parse("<system version=\"1\">\n  <cpu>\n    <gpu dev=\"0\"/>\n    <nic>\n").unwrap();
        assert_eq!(d.cut, Some(Pos { line: 5, col: 1 }));
        let cpu = &d.roots[0].children[0];
        assert_eq!(cpu.name, "cpu");
        let names: Vec<&str> = cpu.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["gpu"], "the unfinished <nic> is dropped");
        assert!(
            d.warnings[0].contains("cut here, inside <nic> opened at line 4 column 5")
                && d.warnings[0].contains("dropped the unfinished <nic>"),
            "{:?}",
            d.warnings
        );
        // Cut inside a tag: the half-written GPU is not read, and a bridge keeps what it holds.
        let d = parse("<system><cpu><pci class=\"0x060400\"><gpu dev=\"0\"/></pci><pci class=\"0x060400\"><gpu dev=\"1\" sm=").unwrap();
        let bridges = &d.roots[0].children[0].children;
        assert_eq!(bridges.len(), 2);
        assert_eq!(bridges[0].children.len(), 1);
        assert!(bridges[1].children.is_empty());
        // A file that was whole has no cut.
        assert_eq!(parse("<system></system>").unwrap().cut, None);
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = parse("<system>\n <cpu></pci>").unwrap_err();
        assert_eq!(e.pos, Pos { line: 2, col: 7 });
        assert!(e.msg.contains("expected </cpu>"), "{}", e.msg);

        let e = parse("<a b=1/>").unwrap_err();
        assert!(e.msg.contains("must be quoted"));
        let e = parse("<a b=\"1/>").unwrap_err();
        assert!(e.msg.contains("end of file"), "{}", e.msg);
        let e = parse("hello").unwrap_err();
        assert_eq!(e.msg, "expected '<', found 'h'");
        let e = parse("<a><!-- x </a>").unwrap_err();
        assert!(e.msg.contains("comment"), "{}", e.msg);
        assert!(parse("<a b=\"1\"c=\"2\"/>").is_err());
        assert!(parse("</a>").is_err());
        assert!(parse("< a/>").is_err());
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let text = "<a>".repeat(100_000);
        let e = parse(&text).unwrap_err();
        assert!(e.msg.contains("nested deeper"), "{}", e.msg);
    }

    #[test]
    fn positions_count_characters() {
        assert_eq!(pos_at("ab\ncé d", 7), Pos { line: 2, col: 4 });
        let bad = b"<a>\n\xff\xfe";
        assert_eq!(decode_utf8(bad).unwrap_err().pos, Pos { line: 2, col: 1 });
    }
}
