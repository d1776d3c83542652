//! The strict reading of a `topo report` document, shared by the exporter's unit tests and the
//! binary's integration tests (included there by path): every element closed, only XML's
//! predefined entities, nothing that refers outside the file, no script or event handler,
//! unique ids, each finding's code, severity and title, and the text of every body row of a
//! table with an id, in document order. Test code only.

/// What a strict reading of a report found.
pub struct Checked {
    pub ids: Vec<String>,
    /// `(code, severity, title)` per finding, in document order.
    pub findings: Vec<(String, String, String)>,
    /// `(table id, the text of each cell)` per row of a table's `<tbody>`, in document order.
    pub rows: Vec<(String, Vec<String>)>,
}

/// Where the reading is inside a table.
#[derive(Default)]
struct Table {
    /// The id of the table being read, and whether its body is.
    id: Option<String>,
    body: bool,
    row: Option<Vec<String>>,
    /// Elements open inside the current cell, the cell's own included.
    cell: usize,
}

impl Table {
    fn start(&mut self, tag: &str, id: Option<String>) {
        match tag {
            "table" => {
                *self = Table {
                    id,
                    ..Table::default()
                }
            }
            "tbody" => self.body = true,
            "tr" if self.body => self.row = Some(vec![]),
            "td" | "th" if self.cell == 0 && self.row.is_some() => {
                if let Some(r) = self.row.as_mut() {
                    r.push(String::new());
                }
                self.cell = 1;
            }
            _ if self.cell > 0 => self.cell += 1,
            _ => {}
        }
    }
    fn end(&mut self, tag: &str, rows: &mut Vec<(String, Vec<String>)>) {
        if self.cell > 0 {
            self.cell -= 1;
            return;
        }
        match tag {
            "tr" => {
                if let (Some(id), Some(row)) = (&self.id, self.row.take()) {
                    rows.push((id.clone(), row));
                }
            }
            "tbody" => self.body = false,
            "table" => *self = Table::default(),
            _ => {}
        }
    }
    fn text(&mut self, t: &str) {
        if self.cell > 0
            && let Some(c) = self.row.as_mut().and_then(|r| r.last_mut())
        {
            c.push_str(t);
        }
    }
}

/// Reads the whole report with quick-xml (every element closed, attributes unescape, only
/// XML's predefined entities) and checks that nothing refers outside it and ids are unique.
pub fn check(doc: &str) -> Checked {
    use quick_xml::events::Event;
    assert!(doc.starts_with("<!DOCTYPE html>"));
    let lower = doc.to_ascii_lowercase();
    for banned in [
        "<script", "<link", "<iframe", "<object", "<embed", "<img", "@import",
    ] {
        assert!(!lower.contains(banned), "{banned} in the report");
    }
    for (i, _) in lower.match_indices("url(") {
        assert!(lower[i..].starts_with("url(#"), "url( leaves the document");
    }
    let mut r = quick_xml::Reader::from_str(doc);
    let mut out = Checked {
        ids: vec![],
        findings: vec![],
        rows: vec![],
    };
    let mut table = Table::default();
    let (mut depth, mut in_title) = (0i32, false);
    let mut title = String::new();
    let mut finding: Option<(String, String)> = None;
    loop {
        match r.read_event() {
            Ok(Event::Start(e)) => {
                depth += 1;
                let (class, code) = attributes(&e, &mut out.ids);
                if code.is_some() {
                    finding = code;
                }
                in_title = class == "h-title";
                let id = (e.name().as_ref() == "table")
                    .then(|| out.ids.last().cloned())
                    .flatten()
                    .filter(|_| has_id(&e));
                table.start(e.name().as_ref(), id);
            }
            Ok(Event::Empty(e)) => {
                attributes(&e, &mut out.ids);
            }
            Ok(Event::Text(t)) => {
                let t = t.xml_content(quick_xml::XmlVersion::Implicit1_0);
                table.text(&t);
                if in_title {
                    title.push_str(&t);
                }
            }
            Ok(Event::GeneralRef(e)) => {
                let c = match &*e {
                    "lt" => '<',
                    "gt" => '>',
                    "amp" => '&',
                    "quot" => '"',
                    "apos" => '\'',
                    n => panic!("entity &{n};"),
                };
                table.text(c.encode_utf8(&mut [0; 4]));
                if in_title {
                    title.push(c);
                }
            }
            Ok(Event::End(e)) => {
                depth -= 1;
                table.end(e.name().as_ref(), &mut out.rows);
                if in_title {
                    let (c, s) = finding.take().expect("a title inside a finding");
                    out.findings.push((c, s, std::mem::take(&mut title)));
                    in_title = false;
                }
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("not well-formed at {}: {e}", r.buffer_position()),
        }
    }
    assert_eq!(depth, 0, "unclosed elements");
    let mut seen = std::collections::HashSet::new();
    for id in &out.ids {
        assert!(seen.insert(id.clone()), "id {id} twice");
    }
    out
}

fn has_id(e: &quick_xml::events::BytesStart) -> bool {
    e.attributes()
        .flatten()
        .any(|a| a.key.as_ref().eq_ignore_ascii_case("id"))
}

/// An element's class and its finding's `(data-code, data-severity)`; ids go to `ids`. A
/// `src` or `href` must stay in the document and no event handler may appear.
fn attributes(
    e: &quick_xml::events::BytesStart,
    ids: &mut Vec<String>,
) -> (String, Option<(String, String)>) {
    let mut class = String::new();
    let (mut code, mut sev) = (None, None);
    for a in e.attributes() {
        let a = a.expect("attribute parses");
        let k = a.key.as_ref().to_ascii_lowercase();
        let v = a
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .expect("attribute value unescapes")
            .into_owned();
        if k == "src" || k.ends_with("href") {
            assert!(v.starts_with('#'), "{k}={v:?} leaves the document");
        }
        assert!(!k.starts_with("on"), "event handler {k}");
        match k.as_str() {
            "id" => ids.push(v),
            "class" => class = v,
            "data-code" => code = Some(v),
            "data-severity" => sev = Some(v),
            _ => {}
        }
    }
    (class, code.zip(sev))
}
